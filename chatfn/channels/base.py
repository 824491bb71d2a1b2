"""What every channel is: it turns platform events into IncomingMessages for the bot and sends
the bot's messages out. It knows nothing about models or functions, and sees the bot only as
its `ChannelHost` (chatfn/runtime/channel_host.py)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.channel_host import ChannelHost


class Channel(ABC):
    #: IncomingMessage.platform of the messages this channel produces.
    platform: str = ""
    #: Whether the channel shows text as it streams in.
    streams: bool = False

    def __init__(self, host: ChannelHost) -> None:
        self.host = host
        host.register(self)

    @abstractmethod
    async def run(self) -> None:
        """Serve until stopped (or, for the console, until input ends)."""

    @abstractmethod
    async def send(self, message: OutgoingMessage) -> None:
        """Deliver a message the bot started on its own (reminders, welcomes), or one the
        outbox owes; raise NotDelivered to keep it waiting, DeliveryRefused to give it up."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Release sockets and tasks."""
