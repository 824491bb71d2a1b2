"""`GET /v1/history`: a chat's stored messages for the web page and API clients, behind the
token, with clear 400s for bad parameters."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime
from pathlib import Path

from aiohttp import ClientSession

from chatfn.channels.http.channel import HttpChannel
from chatfn.testing import TestBot
from providers.scripted import ScriptedModel, say

TOKEN = "history-token"


async def test_history_pages_and_refuses_bad_parameters(tmp_path: Path) -> None:
    config = {"channels": {"http": {"token": TOKEN}}}
    model = ScriptedModel([say("first answer"), say("second answer")])
    tb = TestBot(tmp_path, model=model, config=config, builtins=False)
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    base = f"http://127.0.0.1:{channel.bound_port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with ClientSession(headers=auth) as http:
            for text in ("hello", "again"):
                body = {"chat_id": "private:ann", "sender_id": "ann", "text": text}
                assert (await http.post(f"{base}/v1/messages", json=body)).status == 200

            async def history(query: str) -> tuple[int, dict]:
                resp = await http.get(f"{base}/v1/history?{query}")
                return resp.status, await resp.json()

            status, page = await history("chat_id=private:ann")
            assert status == 200 and page["chat_id"] == "private:ann"
            rows = page["messages"]
            assert [(m["role"], m["text"]) for m in rows] == [
                ("user", "hello"),
                ("assistant", "first answer"),
                ("user", "again"),
                ("assistant", "second answer"),
            ]
            assert rows[0]["sender_id"] == "ann" and rows[0]["message_id"]
            assert rows[1]["sender_name"] == "chatfn"
            assert rows[0]["time"].endswith("Z") and datetime.fromisoformat(rows[0]["time"])
            assert [m["id"] for m in rows] == sorted(m["id"] for m in rows)
            # The newest page of `limit`, then the one before it.
            status, page = await history("chat_id=private:ann&limit=2")
            assert [m["text"] for m in page["messages"]] == ["again", "second answer"]
            before = page["messages"][0]["id"]
            status, page = await history(f"chat_id=private:ann&limit=2&before={before}")
            assert [m["text"] for m in page["messages"]] == ["hello", "first answer"]
            assert (await history("chat_id=private:bob"))[1]["messages"] == []
            for query, field in (
                ("", "chat_id"),
                ("chat_id=%20", "chat_id"),
                ("chat_id=x&limit=0", "limit"),
                ("chat_id=x&limit=501", "limit"),
                ("chat_id=x&limit=ten", "limit"),
                ("chat_id=x&before=-3", "before"),
                ("chat_id=x&chat=y", "chat"),
                (f"chat_id={'x' * 129}", "chat_id"),
            ):
                status, error = await history(query)
                assert (status, error["field"]) == (400, field), query
                assert error["error"].startswith(f"{field}: ")
        async with ClientSession() as anonymous:
            resp = await anonymous.get(f"{base}/v1/history?chat_id=private:ann")
            assert resp.status == 401
    finally:
        await channel.stop()
        await tb.aclose()


async def test_a_history_page_does_not_wait_behind_the_turns_storage_thread(
    tmp_path: Path,
) -> None:
    """Pages are read beside the turns (`Storage.run_aside`): a client paging through a long
    chat neither waits behind the turns' writes nor holds them up."""
    config = {"channels": {"http": {"token": TOKEN}}}
    tb = TestBot(tmp_path, model=ScriptedModel([say("an answer")]), config=config, builtins=False)
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    base = f"http://127.0.0.1:{channel.bound_port}"
    gate = threading.Event()
    try:
        async with ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            body = {"chat_id": "private:ann", "sender_id": "ann", "text": "hello"}
            assert (await http.post(f"{base}/v1/messages", json=body)).status == 200
            busy = asyncio.create_task(tb.bot.storage.run(gate.wait, 10))  # a long write
            await asyncio.sleep(0.05)
            async with asyncio.timeout(5):
                resp = await http.get(f"{base}/v1/history?chat_id=private:ann")
                page = await resp.json()
            assert [m["text"] for m in page["messages"]] == ["hello", "an answer"]
            assert not busy.done()
            gate.set()
            await busy
    finally:
        gate.set()
        await channel.stop()
        await tb.aclose()
