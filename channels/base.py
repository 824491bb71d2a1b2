"""What every channel is: it turns platform events into IncomingMessages for the bot and sends
the bot's messages out. It knows nothing about models or functions."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from common.messages import OutgoingMessage

if TYPE_CHECKING:
    from runtime.bot import Bot


class Channel(ABC):
    #: IncomingMessage.platform of the messages this channel produces.
    platform: str = ""
    #: Whether the channel shows text as it streams in.
    streams: bool = False

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        bot.add_channel(self)

    @abstractmethod
    async def run(self) -> None:
        """Serve until stopped (or, for the console, until input ends)."""

    @abstractmethod
    async def send(self, message: OutgoingMessage) -> None:
        """Deliver a message the bot started on its own (reminders, welcomes)."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Release sockets and tasks."""
