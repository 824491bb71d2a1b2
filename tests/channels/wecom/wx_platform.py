"""The platform's side of WeChat's callback encryption (WXBizMsgCrypt), for the WeCom and
WeChat Official Account fakes: written here from the published description, not imported
from the channel (chatfn/channels/wxcrypt.py), so a mistake in one is caught by the other
and by the docs' own example (test_wxcrypt.py).

Sources: https://developer.work.weixin.qq.com/document/path/90968 (加解密方案说明) and
https://developers.weixin.qq.com/doc/offiaccount/Message_Management/
Message_encryption_and_decryption_instructions.html; the sample code both publish
(WXBizMsgCrypt, with the example vector of test_wxcrypt.py)."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import string

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def new_aes_key() -> str:
    """An EncodingAESKey as the consoles make one: 43 letters and digits."""
    alphabet = string.ascii_letters + string.digits
    while True:
        key = "".join(secrets.choice(alphabet) for _ in range(43))
        if len(base64.b64decode(key + "=")) == 32:
            return key


def signature(*parts: str) -> str:
    return hashlib.sha1("".join(sorted(parts)).encode()).hexdigest()


class PlatformCrypt:
    def __init__(self, token: str, encoding_aes_key: str, receive_id: str) -> None:
        self.token = token
        self.key = base64.b64decode(encoding_aes_key + "=")
        self.receive_id = receive_id

    def encrypt(self, text: str, random: bytes | None = None) -> str:
        body = text.encode()
        plain = (random or os.urandom(16)) + len(body).to_bytes(4, "big") + body
        plain += self.receive_id.encode()
        padder = padding.PKCS7(256).padder()  # 32-byte blocks, as the scheme says
        padded = padder.update(plain) + padder.finalize()
        enc = Cipher(algorithms.AES(self.key), modes.CBC(self.key[:16])).encryptor()
        return base64.b64encode(enc.update(padded) + enc.finalize()).decode()

    def decrypt(self, encrypt: str) -> tuple[str, str]:
        """(message, receive id) of an `Encrypt` field (the bot's passive reply)."""
        dec = Cipher(algorithms.AES(self.key), modes.CBC(self.key[:16])).decryptor()
        plain = dec.update(base64.b64decode(encrypt)) + dec.finalize()
        unpadder = padding.PKCS7(256).unpadder()
        plain = unpadder.update(plain) + unpadder.finalize()
        size = int.from_bytes(plain[16:20], "big")
        return plain[20 : 20 + size].decode(), plain[20 + size :].decode()

    def encrypt_file(self, data: bytes) -> bytes:
        """A file as the intelligent robot's storage keeps it: AES-256-CBC, PKCS#7 to 32."""
        padder = padding.PKCS7(256).padder()
        padded = padder.update(data) + padder.finalize()
        enc = Cipher(algorithms.AES(self.key), modes.CBC(self.key[:16])).encryptor()
        return enc.update(padded) + enc.finalize()

    def sign(self, timestamp: str, nonce: str, encrypt: str = "") -> str:
        return signature(self.token, timestamp, nonce, *([encrypt] if encrypt else []))
