"""The Matrix channel uploads an image a function gave by URL itself (the homeserver cannot
fetch it), so it downloads through the fetch helper: an internal address is refused for good
unless `bot.fetch` allows it (issue 34, item 2), a network failure may pass (the outbox tries
again), and a body in several writes is read whole."""

from __future__ import annotations

from ipaddress import ip_network

import pytest

from chatfn.channels.matrix.send import MatrixSender
from chatfn.channels.matrix.settings import MatrixSettings
from chatfn.common.config import FetchSettings
from chatfn.common.messages import DeliveryRefused, NotDelivered
from tests.fakes.images import png
from tests.fakes.slow_files import SlowFiles


def sender(allow: FetchSettings | None = None) -> MatrixSender:
    return MatrixSender(None, MatrixSettings(), fetch_allow=allow)  # type: ignore[arg-type]


async def test_an_image_url_on_an_internal_address_is_refused_unless_allowed() -> None:
    async with SlowFiles() as files:
        with pytest.raises(DeliveryRefused):
            await sender()._image_bytes(f"{files.url}/cat.png")
        assert files.requests == []
        local = FetchSettings(allow_networks=[ip_network("127.0.0.0/8")])
        image = await sender(local)._image_bytes(f"{files.url}/cat.png")
        assert (image.data, image.mime) == (png(), "image/png")
        with pytest.raises(DeliveryRefused):  # an HTML page is no image, now or later
            await sender(local)._image_bytes(f"{files.url}/page")
        await files.stop()
        with pytest.raises(NotDelivered):  # the server is away: the outbox tries again
            await sender(local)._image_bytes(f"{files.url}/cat.png")
