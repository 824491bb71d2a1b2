"""The channel kit: what every platform channel shares, written once (docs/channels.md).

A platform writes connect, serve, parse and send; the kit owns the lifecycle and the connect
loop (channel.py), per-chat order and intake with confirm-once-stored (inbound.py; its
primitives chatfn/channels/intake.py and outbound.py), the way out under one delivery policy
(sender.py; chatfn/runtime/delivery_policy.py), the error classes (errors.py), the system
events' names (events.py), images in and out (images.py), files served for a platform to
fetch (shelf.py), a REST client's session and Retry-After (rest.py), a state file written
whole (files.py), a spoken reply cut into voice clips (voice.py), Markdown sent as plain
text (plain.py) and the mentions marked in a message's text read (mentions.py). Nothing here
names a platform.
"""

from chatfn.channels.intake import Taken, settled
from chatfn.channels.kit.channel import REFUSED_RETRY, Lifecycle, PlatformChannel, SessionChannel
from chatfn.channels.kit.declare import readme
from chatfn.channels.kit.errors import (
    CredentialsRefused,
    DeliveryRefused,
    NotDelivered,
    RateLimited,
    Unreachable,
)
from chatfn.channels.kit.events import FRIEND_REQUEST, MEMBER_JOINED, friend_request, member_joined
from chatfn.channels.kit.files import write_private_json
from chatfn.channels.kit.images import (
    MAX_IMAGE_IN,
    data_uri,
    decode_image,
    fetch_image,
    image_mime,
    image_name,
    images_out,
)
from chatfn.channels.kit.inbound import Inbound
from chatfn.channels.kit.incoming import chat_parts, sent_at
from chatfn.channels.kit.sender import ChatTarget, Owed, PlatformSender
from chatfn.channels.kit.settings import PlatformSettings
from chatfn.channels.kit.shelf import MAX_SHELF_BYTES, MediaShelf
from chatfn.channels.kit.voice import voice_clips
from chatfn.channels.kit.wire import HeldSocket, json_frames, json_object, webhook_body
from chatfn.channels.outbound import Backoff
from chatfn.runtime.channel_host import Capabilities

__all__ = [
    "FRIEND_REQUEST",
    "MAX_IMAGE_IN",
    "MAX_SHELF_BYTES",
    "MEMBER_JOINED",
    "REFUSED_RETRY",
    "Backoff",
    "Capabilities",
    "ChatTarget",
    "CredentialsRefused",
    "DeliveryRefused",
    "HeldSocket",
    "Inbound",
    "Lifecycle",
    "MediaShelf",
    "NotDelivered",
    "Owed",
    "PlatformChannel",
    "SessionChannel",
    "PlatformSender",
    "PlatformSettings",
    "RateLimited",
    "Taken",
    "Unreachable",
    "chat_parts",
    "data_uri",
    "decode_image",
    "fetch_image",
    "friend_request",
    "image_mime",
    "image_name",
    "images_out",
    "json_frames",
    "json_object",
    "voice_clips",
    "webhook_body",
    "write_private_json",
    "member_joined",
    "readme",
    "sent_at",
    "settled",
]
