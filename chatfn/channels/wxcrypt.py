"""WeChat's callback message encryption (WXBizMsgCrypt), shared by the WeCom and the WeChat
Official Account channels: written once, with `cryptography` (the scheme is the same on both
platforms; only the receive id differs).

The scheme, as the platforms document it (WeCom: https://developer.work.weixin.qq.com/
document/path/90968 "加解密方案说明"; Official Accounts: https://developers.weixin.qq.com/doc/
offiaccount/Message_Management/Message_encryption_and_decryption_instructions.html):

- `EncodingAESKey` is 43 characters of base64 (A-Z a-z 0-9); with one `=` appended it decodes
  to the 32-byte AES key. The IV is the key's first 16 bytes.
- The plaintext is 16 random bytes + the message's length (4 bytes, network order) + the
  message (UTF-8) + the receive id (WeCom: the corp id; an intelligent robot: ""; an
  Official Account: its AppID), PKCS#7-padded to a multiple of 32 bytes (not AES's 16),
  AES-256-CBC encrypted, base64-encoded: the `Encrypt` field.
- The signature (`msg_signature`) is the hex SHA-1 of the sorted concatenation of token,
  timestamp, nonce and `Encrypt`; an Official Account's plain-mode `signature` is the same
  without `Encrypt`.

A request that does not check out raises `CryptError` (the webhook answers 401/400 and
logs one line). XML is read with `read_xml`, which refuses a DOCTYPE (no entities at all:
the platforms never send one) and keeps only the root's simple children.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import struct
import time
import xml.etree.ElementTree as ET

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from chatfn.channels.kit.webhook import Refused

__all__ = ["BLOCK", "CryptError", "WxCrypt", "cdata", "read_xml", "sha1_signature", "xml_reply"]

#: PKCS#7 pads to multiples of 32 bytes in this scheme.
BLOCK = 32
_KEY_SHAPE = re.compile(r"^[A-Za-z0-9+/]{43}$")
#: A callback body larger than this is not the platform's (its messages are a few KB).
MAX_BODY = 1 << 20


class CryptError(Refused):
    """A callback that is not the platform's: a bad signature, a body that does not decrypt,
    another receiver's message. `status` is the HTTP answer (401 or 400)."""

    def __init__(self, why: str, status: int = 401) -> None:
        super().__init__(status, why)


def sha1_signature(*parts: str) -> str:
    """The platforms' signature: hex SHA-1 of the parts sorted and concatenated."""
    return hashlib.sha1("".join(sorted(parts)).encode()).hexdigest()  # noqa: S324 - theirs


def aes_key(encoding_aes_key: str) -> bytes:
    """The 32-byte key of an EncodingAESKey; ValueError saying the shape expected."""
    if not _KEY_SHAPE.match(encoding_aes_key):
        raise ValueError("expected the 43 characters (letters and digits) the platform shows")
    try:
        key = base64.b64decode(encoding_aes_key + "=")
    except (binascii.Error, ValueError):
        raise ValueError("not base64: copy the EncodingAESKey exactly") from None
    if len(key) != 32:
        raise ValueError("does not decode to a 32-byte key: copy the EncodingAESKey exactly")
    return key


class WxCrypt:
    """Signing, encryption and decryption with one account's token, key and receive id."""

    def __init__(self, token: str, encoding_aes_key: str, receive_id: str) -> None:
        self.token = token
        self.key = aes_key(encoding_aes_key)
        self.receive_id = receive_id

    # -- signatures ---------------------------------------------------------------------------
    def sign(self, timestamp: str, nonce: str, encrypt: str = "") -> str:
        parts = [self.token, timestamp, nonce] + ([encrypt] if encrypt else [])
        return sha1_signature(*parts)

    def check(self, signature: str, timestamp: str, nonce: str, encrypt: str = "") -> None:
        """CryptError unless `signature` is this token's over the others."""
        if not signature or not timestamp or not nonce:
            raise CryptError("signature, timestamp or nonce missing")
        expected = self.sign(timestamp, nonce, encrypt)
        if not hmac.compare_digest(signature.lower().encode(), expected.encode()):
            raise CryptError("bad signature")

    # -- encryption ---------------------------------------------------------------------------
    def encrypt(self, message: str, random: bytes | None = None) -> str:
        """`message` as the `Encrypt` field (16 random bytes unless given: tests)."""
        body = message.encode()
        plain = (random or os.urandom(16))[:16]
        plain += struct.pack(">I", len(body)) + body + self.receive_id.encode()
        pad = BLOCK - len(plain) % BLOCK
        plain += bytes([pad]) * pad
        enc = Cipher(algorithms.AES(self.key), modes.CBC(self.key[:16])).encryptor()
        return base64.b64encode(enc.update(plain) + enc.finalize()).decode()

    def decrypt(self, encrypt: str) -> str:
        """The message inside an `Encrypt` field; CryptError when it does not decrypt or is
        for another receiver."""
        try:
            data = base64.b64decode(encrypt, validate=True)
        except (binascii.Error, ValueError):
            raise CryptError("Encrypt is not base64", 400) from None
        if not data or len(data) % 16:
            raise CryptError("Encrypt is not whole AES blocks", 400)
        dec = Cipher(algorithms.AES(self.key), modes.CBC(self.key[:16])).decryptor()
        plain = dec.update(data) + dec.finalize()
        pad = plain[-1]
        if not 1 <= pad <= BLOCK or plain[-pad:] != bytes([pad]) * pad or len(plain) < 20 + pad:
            raise CryptError("does not decrypt with the EncodingAESKey")
        plain = plain[:-pad]
        (size,) = struct.unpack(">I", plain[16:20])
        if 20 + size > len(plain):
            raise CryptError("does not decrypt with the EncodingAESKey")
        message, receiver = plain[20 : 20 + size], plain[20 + size :]
        if not hmac.compare_digest(receiver, self.receive_id.encode()):
            raise CryptError("for another receiver (corp id / AppID)")
        try:
            return message.decode()
        except UnicodeDecodeError:
            raise CryptError("does not decrypt with the EncodingAESKey") from None

    def decrypt_file(self, data: bytes) -> bytes:
        """A file the platform stored encrypted (the intelligent robot's images): AES-256-CBC
        with the key (IV its first 16 bytes), PKCS#7 to 32 bytes, no random prefix, length or
        receive id. CryptError when it does not decrypt."""
        if not data or len(data) % 16:
            raise CryptError("file is not whole AES blocks", 400)
        dec = Cipher(algorithms.AES(self.key), modes.CBC(self.key[:16])).decryptor()
        plain = dec.update(data) + dec.finalize()
        pad = plain[-1]
        if not 1 <= pad <= BLOCK or plain[-pad:] != bytes([pad]) * pad:
            raise CryptError("file does not decrypt with the EncodingAESKey")
        return plain[:-pad]

    def open(self, signature: str, timestamp: str, nonce: str, encrypt: str) -> str:
        """Check the signature over `encrypt`, then decrypt it."""
        self.check(signature, timestamp, nonce, encrypt)
        return self.decrypt(encrypt)

    def seal_xml(self, reply_xml: str, nonce: str, timestamp: str | None = None) -> str:
        """A passive reply (XML) encrypted and signed, as the platform takes it."""
        stamp = timestamp or str(int(time.time()))
        encrypt = self.encrypt(reply_xml)
        return (
            f"<xml><Encrypt>{cdata(encrypt)}</Encrypt>"
            f"<MsgSignature>{cdata(self.sign(stamp, nonce, encrypt))}</MsgSignature>"
            f"<TimeStamp>{stamp}</TimeStamp><Nonce>{cdata(nonce)}</Nonce></xml>"
        )


def cdata(text: str) -> str:
    """`text` in a CDATA section (a `]]>` inside split so it cannot end it)."""
    return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def xml_reply(fields: dict[str, str | int]) -> str:
    """`<xml>` with one element per field: strings as CDATA, numbers as they are."""
    inner = "".join(
        f"<{k}>{v if isinstance(v, int) else cdata(v)}</{k}>" for k, v in fields.items()
    )
    return f"<xml>{inner}</xml>"


def read_xml(body: bytes | str) -> dict[str, str]:
    """The root's children of a platform's XML message as {tag: text}; nested elements (an
    event's details) as `Parent.Child`. CryptError (400) for anything else: not XML, too
    large, or with a DOCTYPE (entities)."""
    raw = body.encode() if isinstance(body, str) else body
    if len(raw) > MAX_BODY:
        raise CryptError("body too large", 400)
    if b"<!DOCTYPE" in raw.upper() or b"<!ENTITY" in raw.upper():
        raise CryptError("XML with a DOCTYPE refused", 400)
    try:
        root = ET.fromstring(raw)
    except ET.ParseError:
        raise CryptError("body is not XML", 400) from None
    out: dict[str, str] = {}
    for child in root:
        if len(child):
            for sub in child:
                out[f"{child.tag}.{sub.tag}"] = (sub.text or "").strip()
        else:
            out[child.tag] = child.text or ""
    return out
