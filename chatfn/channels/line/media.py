"""Pictures offered to LINE by URL: the bot serves them itself, under an unguessable path
that expires (`channels.line.public_url`), as the QQ channel does (chatfn/channels/qq/media.py).

LINE's image message names an `originalContentUrl` and a `previewImageUrl`, https URLs LINE's
servers download (https://developers.line.biz/en/reference/messaging-api/#image-message);
there is no upload. A picture the model made has no URL, so with `public_url` set it is put on
this shelf and LINE is given `{public_url}/line/media/<token>`: 32 random bytes of token,
served for `media_ttl` seconds, at most `MAX_BYTES` held (the oldest go first): the kit's
shelf (chatfn/channels/kit/shelf.py).
"""

from __future__ import annotations

from chatfn.channels import kit

__all__ = ["MAX_BYTES", "MEDIA_ROUTE", "MediaShelf"]

MEDIA_ROUTE = "/line/media/{token}"
MAX_BYTES = kit.MAX_SHELF_BYTES


class MediaShelf(kit.MediaShelf):
    """The pictures LINE may fetch now, by token."""

    route = MEDIA_ROUTE
