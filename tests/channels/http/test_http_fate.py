"""Two chatfn bots wired to each other through their HTTP APIs (issue 40 §3): each answers
what the other said, until the loop guard of one stops the exchange with one notice and a
cool-down; `GET /v1/messages/{id}/fate` (issue 40 §1) then tells integrations what became of
each message, behind the token, with a 400 for a bad id and a 404 for no such message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import ClientSession

from chatfn.channels.http.channel import HttpChannel
from chatfn.testing import TestBot
from providers.scripted import ScriptedModel, say

TOKEN = "fate-token"
NOTICE = "I am pausing this exchange with"


async def _bot(tmp_path: Path, name: str, guard: dict[str, Any]) -> tuple[TestBot, HttpChannel]:
    config = {
        "bot": {"name": name, "loop_guard": guard, "held_notice_after": 0},
        "channels": {"http": {"token": TOKEN}},
    }
    model = ScriptedModel([say(f"{name} says: tell me more")], name=name, repeat_last=True)
    tb = TestBot(tmp_path / name, model=model, config=config)
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    return tb, channel


async def test_two_bots_answering_each_other_stop_with_one_notice(tmp_path: Path) -> None:
    alpha, alpha_http = await _bot(tmp_path, "alpha", {"messages": 5, "window": 60})
    beta, beta_http = await _bot(tmp_path, "beta", {})  # the defaults: 20 in 60 s
    urls = {
        "alpha": f"http://127.0.0.1:{alpha_http.bound_port}",
        "beta": f"http://127.0.0.1:{beta_http.bound_port}",
    }
    said: list[tuple[str, str]] = []  # (who answered, what)
    try:
        async with ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            # The relay: what one bot says in group:arena reaches the other as a message
            # addressed to it, from the first bot's account.
            text, to, sender = "hello alpha", "alpha", "beta"
            for _ in range(60):
                body = {
                    "chat_id": "group:arena",
                    "sender_id": sender,
                    "text": text,
                    "is_group": True,
                    "at_bot": True,
                }
                resp = await http.post(f"{urls[to]}/v1/messages", json=body)
                assert resp.status == 200
                replies = (await resp.json())["replies"]
                if not replies:
                    break
                said += [(to, r["text"]) for r in replies]
                text, to, sender = replies[-1]["text"], sender, to
            else:
                raise AssertionError(f"the bots never stopped: {said[-4:]}")
            notices = [(who, t) for who, t in said if NOTICE in t]
            assert notices == [
                (
                    "alpha",
                    "I am pausing this exchange with beta for 5 minutes: 6 messages in "
                    "60 seconds looks like two bots answering each other.",
                )
            ]
            # alpha answered 5, then its notice; beta answered each of those 6
            assert [who for who, _t in said].count("alpha") == 6
            assert [who for who, _t in said].count("beta") == 6
            assert said[-1][0] == "beta"  # beta's answer to the notice went unanswered

            # GET /v1/messages/{id}/fate on alpha: what became of each message beta sent
            page = await http.get(f"{urls['alpha']}/v1/history?chat_id=group:arena&limit=100")
            users = [m for m in (await page.json())["messages"] if m["role"] == "user"]
            fates = []
            for row in users:
                resp = await http.get(f"{urls['alpha']}/v1/messages/{row['id']}/fate")
                assert resp.status == 200
                fates.append(await resp.json())
            assert [(f["fate"], f["detail"], f["told"]) for f in fates] == [
                *[("answered", "alpha", False)] * 5,
                ("ignored", "loop_guard", True),
                ("ignored", "loop_guard", False),
            ]
            assert fates[0]["id"] == users[0]["id"] and fates[0]["sender_id"] == "beta"
            assert fates[0]["chat_id"] == "group:arena" and fates[0]["since"].endswith("Z")
            counted = alpha.bot.metrics.message_fates.values
            assert counted[("answered",)] == 5 and counted[("ignored",)] == 2
            assert (
                "chatfn_message_fates" in await (await http.get(f"{urls['alpha']}/metrics")).text()
            )

            for bad in ("abc", "0", "-1", "99999999999999999999"):
                resp = await http.get(f"{urls['alpha']}/v1/messages/{bad}/fate")
                assert resp.status == 400, bad
                assert (await resp.json())["field"] == "id"
            resp = await http.get(f"{urls['alpha']}/v1/messages/{10**9}/fate")
            assert resp.status == 404
            # a bot's own reply is no incoming message: no fate
            replies = [m for m in (await page.json())["messages"] if m["role"] != "user"]
            resp = await http.get(f"{urls['alpha']}/v1/messages/{replies[0]['id']}/fate")
            assert resp.status == 404
        async with ClientSession() as anonymous:
            resp = await anonymous.get(f"{urls['alpha']}/v1/messages/{users[0]['id']}/fate")
            assert resp.status == 401
    finally:
        for channel in (alpha_http, beta_http):
            await channel.stop()
        for tb in (alpha, beta):
            await tb.aclose()
