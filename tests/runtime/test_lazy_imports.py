"""What a running bot does not import until it needs it (bench/README.md, "Memory and
start-up"): checked in a fresh interpreter, since the test session itself imports everything."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from chatfn.storage import schema

ROOT = Path(__file__).resolve().parents[2]

# Each is several hundred KB to several MB of a bot's memory.
LAZY = [
    "sqlalchemy.orm",  # the tables are Core tables (chatfn/storage/models.py)
    "sqlalchemy.dialects.postgresql",  # only on PostgreSQL (chatfn/storage/chat_state.py)
    "prometheus_client",  # on the first /metrics scrape (chatfn/common/metrics.py)
    "apscheduler.schedulers",  # once a reminder exists (reminders/service.py)
    "apscheduler.jobstores",
    "providers.text_tools.parser",  # on a reply that may hold a text tool call
    "json_repair",
    "alembic",  # only when a migration is pending (chatfn/storage/schema.py)
]

SCRIPT = """
import asyncio, json, sys, uuid
import chatfn.channels.http.channel
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import load_settings


async def main():
    bot = Bot(load_settings(sys.argv[1]))
    await bot.start(services=True, resume=True)
    sent = []

    async def sink(out):
        sent.append(out)

    chat = uuid.uuid4().hex
    msg = IncomingMessage(platform="http", chat_id=chat, sender_id="u1", text="/help")
    await asyncio.wait_for(bot.handle(msg, sink), 30)
    assert sent, "no reply to /help"
    await bot.aclose()


asyncio.run(main())
print(json.dumps(sorted(m for m in sys.modules)))
"""


def run_bot(tmp_path: Path) -> set[str]:
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"storage": {"url": f"sqlite:///{tmp_path / 'bot.db'}"}}))
    for _ in range(2):  # the second start is the measured one: no migration pending
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(config)],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_a_started_bot_answering_a_command_has_not_imported_the_lazy_modules(tmp_path):
    loaded = run_bot(tmp_path)
    assert "sqlalchemy" in loaded and "function_calls.builtins.reminders" in loaded
    early = [m for m in LAZY if any(n == m or n.startswith(m + ".") for n in loaded)]
    assert early == []


def test_a_first_start_on_an_empty_database_migrates_without_importing_alembic(tmp_path):
    """A bot's first start migrates its empty database in a child process
    (chatfn/storage/schema_child.py): Alembic and Mako never load into the bot's own, which
    would keep them (~13 MB) for its life; the database is at the head all the same."""
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"storage": {"url": f"sqlite:///{tmp_path / 'bot.db'}"}}))
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(config)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    loaded = set(json.loads(out.splitlines()[-1]))
    assert "chatfn.runtime.bot" in loaded
    assert sorted(m for m in loaded if m.split(".")[0] in ("alembic", "mako")) == []
    with sqlite3.connect(tmp_path / "bot.db") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (schema.head(),)
        ]
