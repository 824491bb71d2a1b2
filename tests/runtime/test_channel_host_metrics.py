"""The host a Bot gives its platform channels has the bot's metrics: QQ counts a reply it gave
up (`reply_limit`) through `host.metrics`, which the Bot's channel host lacked (mypy found it:
`ChannelHost` had no `metrics`, and QQ's drop raised AttributeError instead of counting)."""

from __future__ import annotations

from pathlib import Path

from chatfn.runtime.bot import BotChannelHost
from chatfn.testing import TestBot


async def test_a_channel_counts_a_dropped_message_in_the_bots_metrics(tmp_path: Path) -> None:
    tb = TestBot(tmp_path)
    try:
        host = BotChannelHost(tb.bot)
        host.metrics.messages_dropped.labels("test", "reply_limit").inc()
        body, _ = tb.bot.metrics.render()
    finally:
        await tb.aclose()
    line = 'chatfn_messages_dropped_total{channel="test",reason="reply_limit"} 1.0'
    assert line in body.decode()
