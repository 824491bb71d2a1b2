"""Images handed to QQ by URL: the bot serves them itself, under an unguessable path that
expires (`channels.qq.public_url`).

QQ's rich-media upload (`POST /v2/{groups|users}/{id}/files`) takes a `url` QQ downloads, or
the bytes as `file_data`, which the documentation marks "not yet supported" (peers report 500s
in C2C chats). A picture the model made has no URL, so with `public_url` set (the address at
which QQ's servers reach the bot's web server) the image is put on this shelf and QQ is given
`{public_url}/qq/media/<token>`: 32 random bytes of token, served for `channels.qq.media_ttl`
seconds (QQ downloads it at once), at most `kit.MAX_SHELF_BYTES` held (the oldest go first):
the kit's shelf (chatfn/channels/kit/shelf.py).
"""

from __future__ import annotations

from chatfn.channels import kit

__all__ = ["MEDIA_ROUTE", "MediaShelf"]

MEDIA_ROUTE = "/qq/media/{token}"


class MediaShelf(kit.MediaShelf):
    """The images QQ may fetch now, by token."""

    route = MEDIA_ROUTE
