"""The live log tail (SSE): lines of the chat asked for, at the level asked for, secrets masked;
a scoped user's tail holds only their chats' lines. The config check runs `chatfn check` on the
bot's config file and reports its lines."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml
from loguru import logger

from chatfn.runtime.console.logs import BACKLOG
from tests.channels.http.admin.conftest import TOKEN, admin_config
from tests.kit import until


async def _lines(resp, want: int) -> list[dict]:
    found: list[dict] = []
    async with asyncio.timeout(5):
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("data: "):
                found.append(json.loads(line[6:]))
                if len(found) == want:
                    return found
    return found


async def test_log_tail_filters_by_chat_and_level_and_masks_secrets(console, monkeypatch) -> None:
    monkeypatch.setattr("chatfn.runtime.logging._secrets", {TOKEN})
    c = await console()
    alice, bob = await c.client("alice"), await c.client("bob")
    mine = await alice.http.get(f"{c.base}/admin/api/logs?chat=http:team-a&level=WARNING")
    scoped = await bob.http.get(f"{c.base}/admin/api/logs")
    assert mine.status == 200 and mine.headers["Content-Type"] == "text/event-stream"
    await mine.content.readline(), await scoped.content.readline()  # ": connected"
    assert len(c.tb.bot.api_host.console.logs._watchers) == 2
    logger.bind(chat_id="team-a").info("an info line of team-a")  # below WARNING
    logger.bind(chat_id="ops").warning("a warning in ops")  # another chat
    logger.bind(chat_id="team-a").warning(f"leaked {TOKEN} in team-a")
    [line] = await _lines(mine, 1)
    assert line["text"] == "leaked *** in team-a" and line["level"] == "WARNING"
    assert line["chat_id"] == "team-a" and line["time"].endswith("Z")
    seen = await _lines(scoped, 2)  # bob (http:team-*): the team-a lines only
    assert [x["text"] for x in seen] == ["an info line of team-a", "leaked *** in team-a"]
    mine.close(), scoped.close()
    await until(  # the handlers end when they notice the clients left
        lambda: not c.tb.bot.api_host.console.logs._watchers, 5, "the log watchers did not end"
    )
    # Nobody watches: only the backlog's sink stays (one, not one per page opened).
    logs = c.tb.bot.api_host.console.logs
    assert logs._sink is not None and logs._keeping
    assert (await alice.get("/admin/api/logs?level=LOUD"))[0] == 400


async def test_the_log_page_opens_with_the_last_lines(console, monkeypatch) -> None:
    monkeypatch.setattr("chatfn.runtime.logging._secrets", {TOKEN})
    c = await console()
    logger.bind(chat_id="team-a").warning(f"before anyone watched, {TOKEN}")
    logger.bind(chat_id="ops").warning("an ops line before")
    alice, bob = await c.client("alice"), await c.client("bob")
    mine = await alice.http.get(f"{c.base}/admin/api/logs?level=WARNING")
    await mine.content.readline()  # ": connected"
    old = await _lines(mine, 2)
    assert [x["text"] for x in old] == ["before anyone watched, ***", "an ops line before"]
    # A scoped user's backlog holds their chats' lines only.
    scoped = await bob.http.get(f"{c.base}/admin/api/logs?level=WARNING")
    await scoped.content.readline()
    logger.bind(chat_id="team-a").warning("a new team-a line")
    seen = await _lines(scoped, 2)
    assert [x["text"] for x in seen] == ["before anyone watched, ***", "a new team-a line"]
    mine.close(), scoped.close()
    # The backlog is bounded.
    logs = c.tb.bot.api_host.console.logs
    for n in range(BACKLOG + 5):
        logger.warning("filler {}", n)
    await until(
        lambda: len(logs._kept) == BACKLOG and logs._kept[-1][0]["text"].endswith(str(BACKLOG + 4))
    )


async def test_config_check_reports_check_system_lines(console, tmp_path: Path) -> None:
    config = admin_config()
    config["storage"] = {"url": f"sqlite:///{tmp_path / 'check.db'}"}
    config["plugins"] = {"paths": []}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    c = await console()
    c.tb.bot.settings._config_file = path
    alice = await c.client("alice")
    status, report = await alice.send("POST", "/admin/api/check")
    assert status == 200, report
    texts = [line["text"] for line in report["lines"]]
    assert any(t.startswith("config: ") and "config.yaml" in t for t in texts), texts
    assert any(t.startswith("database: ") and "check.db" in t for t in texts), texts
    assert {line["status"] for line in report["lines"]} <= {"ok", "warn", "fail"}
    assert report["text"].splitlines()[0][0] in "✓!✗" and report["duration_ms"] > 0
    entries = (await alice.get("/admin/api/audit"))[1]["entries"]
    assert entries[0]["action"] == "check" and entries[0]["detail"]["ok"] == report["ok"]
