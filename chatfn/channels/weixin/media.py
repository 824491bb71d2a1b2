"""Images and voice through iLink's CDN, encrypted with AES-128-ECB and PKCS#7 padding
(openclaw-weixin docs/protocol.md "CDN media flow", src/cdn/upload.ts, src/cdn/pic-decrypt.ts;
AstrBot's weixin_oc client).

Out: a random 16-byte key and file key; `getuploadurl` (media_type 1 for an image, 4 for a
voice; the plaintext's size and MD5, the ciphertext's size, the key in hex) names where to
POST the ciphertext (`upload_full_url`, else `{cdn}/upload?encrypted_query_param=..&filekey=..`);
the CDN's `x-encrypted-param` header is the download parameter the image or voice item
carries, with the key as base64 (of its hex, as the peers send it). A voice item says its
encoding as openclaw-weixin's src/api/types.ts `VoiceItem` lists them (6: SILK, at 24 kHz,
16-bit) and its length in milliseconds (`playtime`), as its src/messaging/send.ts
`sendVoiceMessageWeixin` sends them.

In: the item's `media` gives `full_url` or `encrypt_query_param` (download from
`{cdn}/download?encrypted_query_param=..`) and `aes_key`: base64 of the 16 raw bytes, or of
their 32 hex digits; an image's own `aeskey` (hex) comes first.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from chatfn.channels.weixin.api import IlinkApi

__all__ = [
    "IMAGE",
    "SILK",
    "VOICE",
    "Uploaded",
    "decrypt",
    "download_url",
    "encrypt",
    "media_key",
    "padded_size",
    "upload_image",
    "upload_media",
]

IMAGE, VOICE = 1, 4  # getuploadurl's media_type of an image, of a voice
SILK = 6  # VoiceItem.encode_type of SILK (1 pcm, 2 adpcm, 3 feature, 4 speex, 5 amr, 7 mp3)
SILK_RATE = 24000  # the sample rate chatfn.common.audio.to_silk encodes at


def encrypt(data: bytes, key: bytes) -> bytes:
    padder = padding.PKCS7(128).padder()
    padded = padder.update(data) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.ECB()).encryptor()  # noqa: S305 - iLink's
    return encryptor.update(padded) + encryptor.finalize()


def decrypt(data: bytes, key: bytes) -> bytes:
    """The plaintext; ValueError when `data` is not a whole number of blocks or its padding
    is wrong (the wrong key)."""
    decryptor = Cipher(algorithms.AES(key), modes.ECB()).decryptor()  # noqa: S305 - iLink's
    padded = decryptor.update(data) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(padded) + unpadder.finalize()


def padded_size(size: int) -> int:
    """The ciphertext's size of `size` bytes (PKCS#7 always adds 1 to 16 bytes)."""
    return (size // 16 + 1) * 16


def media_key(item: dict[str, Any], media: dict[str, Any]) -> bytes | None:
    """The AES key of an inbound media item: the image's `aeskey` (hex), else `media.aes_key`
    (base64 of 16 bytes or of 32 hex digits); None when there is none or it is malformed."""
    hexkey = str(item.get("aeskey") or "").strip()
    if hexkey:
        try:
            raw = bytes.fromhex(hexkey)
        except ValueError:
            return None
        return raw if len(raw) == 16 else None
    value = str(media.get("aes_key") or "").strip()
    if not value:
        return None
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) == 16:
        return raw
    text = raw.decode("ascii", "replace")
    if len(raw) == 32 and all(c in "0123456789abcdefABCDEF" for c in text):
        return bytes.fromhex(text)
    return None


def download_url(media: dict[str, Any], cdn_base_url: str) -> str | None:
    full = str(media.get("full_url") or "").strip()
    if full.startswith(("http://", "https://")):
        return full
    param = str(media.get("encrypt_query_param") or "").strip()
    if not param:
        return None
    return f"{cdn_base_url}/download?encrypted_query_param={quote(param, safe='')}"


@dataclass(frozen=True, slots=True)
class Uploaded:
    """A file on the CDN: what the image or voice item of sendmessage carries."""

    download_param: str
    key: bytes
    cipher_size: int

    def media(self) -> dict[str, Any]:
        return {
            "encrypt_query_param": self.download_param,
            "aes_key": base64.b64encode(self.key.hex().encode()).decode(),
            "encrypt_type": 1,
        }

    def item(self) -> dict[str, Any]:
        return {"type": 2, "image_item": {"media": self.media(), "mid_size": self.cipher_size}}

    def voice_item(self, playtime_ms: int) -> dict[str, Any]:
        """A SILK voice (24 kHz, 16-bit) of `playtime_ms` milliseconds."""
        voice = {
            "media": self.media(),
            "encode_type": SILK,
            "bits_per_sample": 16,
            "sample_rate": SILK_RATE,
            "playtime": playtime_ms,
        }
        return {"type": 3, "voice_item": voice}


async def upload_image(
    api: IlinkApi, session: aiohttp.ClientSession, cdn_base_url: str, to_user: str, data: bytes
) -> Uploaded:
    """Encrypt the image `data` and put it on the CDN for `to_user` (upload_media)."""
    return await upload_media(api, session, cdn_base_url, to_user, data, IMAGE)


async def upload_media(
    api: IlinkApi,
    session: aiohttp.ClientSession,
    cdn_base_url: str,
    to_user: str,
    data: bytes,
    media_type: int,
) -> Uploaded:
    """Encrypt `data` and put it on the CDN for `to_user` as `media_type` (IMAGE, VOICE);
    IlinkError, aiohttp's errors, or ValueError when the CDN's answer names no download
    parameter."""
    key = secrets.token_bytes(16)
    filekey = secrets.token_hex(16)
    answer = await api.post(
        "getuploadurl",
        {
            "filekey": filekey,
            "media_type": media_type,
            "to_user_id": to_user,
            "rawsize": len(data),
            "rawfilemd5": hashlib.md5(data).hexdigest(),  # noqa: S324 - the protocol's field
            "filesize": padded_size(len(data)),
            "no_need_thumb": True,
            "aeskey": key.hex(),
        },
    )
    url = str(answer.get("upload_full_url") or "").strip()
    if not url:
        param = str(answer.get("upload_param") or "").strip()
        if not param:
            raise ValueError("getuploadurl named no upload URL")
        url = (
            f"{cdn_base_url}/upload?encrypted_query_param={quote(param, safe='')}"
            f"&filekey={quote(filekey, safe='')}"
        )
    cipher = encrypt(data, key)
    async with session.post(
        url,
        data=cipher,
        headers={"Content-Type": "application/octet-stream"},
        timeout=aiohttp.ClientTimeout(total=60),
    ) as response:
        detail = (await response.read())[:200]
        param = response.headers.get("x-encrypted-param", "")
        if response.status != 200 or not param:
            raise aiohttp.ClientResponseError(
                response.request_info,
                (),
                status=response.status,
                message=f"CDN upload: {detail!r}"[:200],
            )
    return Uploaded(param, key, len(cipher))
