#!/usr/bin/env sh
# Installs the real servers the open-protocol channels' tests start themselves (marker
# `services`): ngircd (IRC, tests/channels/irc), Prosody (XMPP, tests/channels/xmpp) and
# Dovecot's IMAP server (e-mail, tests/channels/email). The tests run each in a temporary
# directory on a free port; no system service is wanted, so none is started by the install
# (a policy-rc.d that says no while apt-get runs, when the machine has none of its own).
# Also ffmpeg (and espeak-ng), which the voice tests convert and make audio with, and the
# opencore AMR-NB library (libopencore-amrnb0), which encodes WeCom's and DingTalk's voice.
# Idempotent and quiet: does nothing when all are already installed.
set -eu
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }
have_amr() { ldconfig -p 2>/dev/null | grep -q libopencore-amrnb.so; }
if have ngircd && have prosody && have dovecot && have ffmpeg && have espeak-ng && have_amr; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
fi
POLICY=/usr/sbin/policy-rc.d
OURS=""
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 755 "$POLICY"
    OURS=1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends ngircd prosody dovecot-imapd ffmpeg espeak-ng \
    libopencore-amrnb0 >/dev/null
if [ -n "$OURS" ]; then
    $SUDO rm -f "$POLICY"
fi
