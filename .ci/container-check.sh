#!/usr/bin/env bash
# The container image as users run it: build the repository's Dockerfile and run its image with
# rootful podman (no Docker engine, no image registry here), then the checks of
# .ci/container_check.py. One command, runnable by hand (as root):
#
#   .ci/container-check.sh [CHECKOUT]          (default: the checkout holding this script)
#
# 0. .ci/release-check.sh: `python -m build`, `twine check`, the version in one place.
# 1. podman, runc and debootstrap from Debian's packages, installed when missing.
# 2. The base image: Debian bookworm made with `debootstrap --variant=minbase` plus Debian's
#    python3 (the Dockerfile's BASE_IMAGE; the official image is in no registry reachable here),
#    with the host's locally added CA certificates (pip in the build trusts what the host
#    trusts). Its tarball is cached in $CHATFN_CONTAINER_CACHE (default
#    /var/tmp/chatfn-container-cache), keyed by those certificates; a clean machine makes it.
# 3. `podman build --format docker` (the OCI format drops HEALTHCHECK) of a copy of the tree.
# 4. The checks (.ci/container_check.py): /healthz on the published port, a non-root process,
#    the healthcheck, a message answered by a fake model on the host, the database and a plugin
#    on the volume surviving a new container, SIGTERM mid-turn losing nothing.
# 5. With CHATFN_COMPOSE_CHECK=1, compose.cluster.yaml with podman-compose (.ci/compose_check.py):
#    100 messages over 10 chats with a worker container killed mid-run, none lost or twice.
#
# podman's storage, run root and network config live in a temporary folder removed at the end,
# so a run leaves nothing behind but the cache. The settings this machine needs, each found by a
# failure: the runc runtime (crun refuses the hybrid cgroups), ulimits no higher than the
# host's hard limits (root cannot raise them), the cgroupfs manager and file events (no systemd).
set -euo pipefail
repo="$(cd "${1:-"$(dirname "$0")/.."}" && pwd)"
cache="${CHATFN_CONTAINER_CACHE:-/var/tmp/chatfn-container-cache}"
suite="bookworm"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
say() { printf 'container-check: %s\n' "$*"; }
fail() { printf 'container-check: FAILED: %s\n' "$*" >&2; exit 1; }
started=$SECONDS

[ "$(id -u)" -eq 0 ] || fail "run as root (rootful podman, debootstrap)"

# The release first (cheap): sdist and wheel, twine check, one version everywhere.
"$repo/.ci/release-check.sh" "$repo"

missing=()
for tool in podman runc debootstrap; do
    command -v "$tool" > /dev/null || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]} (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q > /dev/null
    apt-get install -y -q --no-install-recommends podman runc debootstrap uidmap \
        containernetworking-plugins netavark aardvark-dns conmon iptables > /dev/null
fi

work="$(mktemp -d /var/tmp/chatfn-container-check.XXXXXX)"
podman_args=(--root "$work/storage" --runroot "$work/run" --tmpdir "$work/tmp"
    --network-config-dir "$work/net" --runtime runc --cgroup-manager cgroupfs
    --events-backend file --storage-driver overlay)
pm() { podman "${podman_args[@]}" "$@"; }
cleanup() {
    pm rm --all --force --time 0 > /dev/null 2>&1 || true
    pm system reset --force > /dev/null 2>&1 || true
    # an overlay mount left by an interrupted build would keep rm from the folder
    grep -o " $work/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/tmp" "$work/net" "$cache"

nofile="$(ulimit -Hn)"
nproc="$(ulimit -Hu)"
[ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
ulimits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")

# --- the base image (cached tarball) ---
certs="$(cat /usr/local/share/ca-certificates/*.crt 2> /dev/null | sha256sum | cut -c1-12)"
base_tar="$cache/base-$suite-python3-$certs.tar"
if [ ! -s "$base_tar" ]; then
    say "making the base image with debootstrap ($suite, minbase + python3; a few minutes)"
    root="$work/rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,passwd \
        "$suite" "$root" "$mirror" > "$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log" >&2; fail "debootstrap"; }
    if compgen -G "/usr/local/share/ca-certificates/*.crt" > /dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
        chroot "$root" update-ca-certificates > /dev/null 2>&1
    fi
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar"
    rm -rf "$root"
else
    say "base image from the cache: $base_tar"
fi
pm import --quiet "$base_tar" localhost/chatfn-base:$suite > /dev/null

# --- the image, from a copy of the tree (tracked files and new ones not ignored) ---
ctx="$work/context"
mkdir "$ctx"
if git -C "$repo" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 -I{} sh -c '[ -f "$1" ] && printf "%s\0" "$1"' _ {}) \
        | (cd "$repo" && tar --null -T - -cf -) | tar -xf - -C "$ctx"
    revision="$(git -C "$repo" rev-parse HEAD)"
else
    cp -R "$repo/." "$ctx"
    revision=""
fi
version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/chatfn/common/version.py")"
[ -n "$version" ] || fail "no __version__ in chatfn/common/version.py"
say "building the image (chatfn $version, EXTRAS=${EXTRAS:-postgres,rabbitmq})"
build_started=$SECONDS
pm build --quiet --format docker "${ulimits[@]}" \
    --build-arg BASE_IMAGE=localhost/chatfn-base:$suite \
    --build-arg EXTRAS="${EXTRAS:-postgres,rabbitmq}" \
    --build-arg VERSION="$version" --build-arg REVISION="$revision" \
    -t localhost/chatfn:check "$ctx" > "$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log" >&2; fail "podman build"; }
say "built in $((SECONDS - build_started)) s: $(pm image inspect -f '{{.Size}}' localhost/chatfn:check) bytes"

python="${PYTHON:-python3}"
PODMAN_ARGS="${podman_args[*]} " ULIMITS="${ulimits[*]}" CHATFN_VERSION="$version" \
    "$python" "$repo/.ci/container_check.py" localhost/chatfn:check
if [ "${CHATFN_COMPOSE_CHECK:-0}" = 1 ]; then
    command -v podman-compose > /dev/null || {
        say "installing podman-compose (Debian package)"
        apt-get update -q > /dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            podman-compose > /dev/null
    }
    PODMAN_ARGS="${podman_args[*]} " ULIMITS="${ulimits[*]}" CHATFN_VERSION="$version" \
        BASE_IMAGE=localhost/chatfn-base:$suite \
        "$python" "$repo/.ci/compose_check.py" localhost/chatfn:check "$ctx"
fi
say "ok in $((SECONDS - started)) s"
