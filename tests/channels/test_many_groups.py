"""One bot for many groups, end to end over the HTTP channel: two chats on two models (OpenAI
and Anthropic protocols, real SDKs, local scripted servers) with two personas from `chats:`
rules; admins switch one chat's model and persona, reset its context and read its settings and
stats from the chat, members are refused; the other chat's requests are unchanged, before and
after a restart; `/metrics` is parsed with prometheus_client's own parser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families

from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from tests.fakes.protocols import Turn, replies
from tests.fakes.raw_replay import RawReplayServer

TOKEN = "metrics-token"
PIRATE = "You are a pirate."
LIBRARIAN = "You are a librarian."
HAIKU = "Speak only in haiku."


def _config(tmp_path: Path, alpha: str, beta: str) -> dict[str, Any]:
    common = {"api_key": "test-key", "max_retries": 0, "timeout": 10}
    return {
        "storage": {"url": f"sqlite:///{tmp_path / 'bot.db'}"},
        "plugins": {"paths": []},
        "bot": {"admins": ["alice"], "respond_in_groups": "always"},
        "models": {
            "alpha": {"provider": "openai", "model": "gpt-4o", "base_url": f"{alpha}/v1", **common},
            "beta": {"provider": "anthropic", "model": "claude-test", "base_url": beta, **common},
        },
        "personas": {"pirate": PIRATE},
        "chats": [
            {"match": {"chat_id": "group:a"}, "model": "alpha", "persona": "pirate"},
            {"match": {"is_group": True}, "model": "beta", "system_prompt": LIBRARIAN},
        ],
        "channels": {"http": {"token": TOKEN}},
    }


def _system(body: dict[str, Any]) -> str:
    if "system" in body:  # Anthropic
        system = body["system"]
        return system if isinstance(system, str) else "".join(b["text"] for b in system)
    return body["messages"][0]["content"]


def _texts(body: dict[str, Any]) -> list[str]:
    """The conversation a request carried, without the system prompt."""
    out = []
    for m in body["messages"]:
        if m["role"] == "system":
            continue
        content = m["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        out.append(text.split("</context>\n", 1)[-1])  # without the newest turn's note
    return out


class Running:
    def __init__(self, bot: Bot, channel: HttpChannel) -> None:
        self.bot, self.channel = bot, channel
        self.url = f"http://127.0.0.1:{channel.bound_port}"

    async def say(self, chat: str, sender: str, text: str) -> list[str]:
        async with ClientSession() as http:
            resp = await http.post(
                f"{self.url}/v1/messages",
                json={"chat_id": chat, "sender_id": sender, "text": text, "is_group": True},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert resp.status == 200, await resp.text()
            return [r["text"] for r in (await resp.json())["replies"]]

    async def stop(self) -> None:
        await self.channel.stop()
        await self.bot.aclose()


async def _start(config: dict[str, Any], tmp_path: Path) -> Running:
    bot = Bot(parse_settings(config, base_dir=tmp_path))
    channel = HttpChannel(bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    await bot.start()
    return Running(bot, channel)


async def test_two_groups_two_models_admin_overrides_and_restart(tmp_path: Path) -> None:
    answers = [Turn(text=f"answer {i}") for i in range(20)]
    async with RawReplayServer() as alpha, RawReplayServer() as beta:
        alpha.queue = list(replies("openai", answers, stream=False))
        beta.queue = list(replies("anthropic", answers, stream=False))
        config = _config(tmp_path, alpha.url, beta.url)
        run = await _start(config, tmp_path)
        try:
            # Two chats, two models, two personas, from the rules.
            assert await run.say("group:a", "bob", "hello") == ["answer 0"]
            assert await run.say("group:b", "bob", "hello") == ["answer 0"]
            assert [_system(b).splitlines()[0] for b in alpha.bodies()] == [PIRATE]
            assert [_system(b).splitlines()[0] for b in beta.bodies()] == [LIBRARIAN]

            # A member may not change anything.
            refused = await run.say("group:a", "bob", "/model beta")
            assert refused == ["model is for admins only."]
            assert await run.say("group:a", "bob", "/settings") == ["settings is for admins only."]

            # An admin switches chat A's model and persona: chat A only.
            shown = (await run.say("group:a", "alice", "/model"))[0]
            assert "alpha (chats[0])" in shown and "alpha, beta" in shown
            assert await run.say("group:a", "alice", "/model beta") == ["This chat now uses beta."]
            await run.say("group:a", "alice", f"/persona {HAIKU}")
            await run.say("group:a", "bob", "again")
            await run.say("group:b", "bob", "again")
            assert len(alpha.bodies()) == 1
            systems = [_system(b).splitlines()[0] for b in beta.bodies()]
            assert systems == [LIBRARIAN, HAIKU, LIBRARIAN]

            settings = (await run.say("group:a", "alice", "/settings"))[0]
            assert "model: beta (override by alice at" in settings
            assert '"Speak only in haiku."' in settings
            assert "history_size: 20 (default)" in settings
            assert "respond_in_groups: always (bot.respond_in_groups)" in settings
            b_settings = (await run.say("group:b", "alice", "/settings"))[0]
            assert "model: beta (chats[1])" in b_settings
            assert '"You are a librarian." (chats[1])' in b_settings

            # /reset: the model sees nothing said before it; the history stays stored.
            assert (await run.say("group:a", "alice", "/reset"))[0].startswith("Fresh start")
            await run.say("group:a", "bob", "fresh topic")
            assert _texts(beta.bodies()[-1]) == ["bob: fresh topic"]
            assert run.bot.storage.count_messages("http", "group:a") > 10

            stats = (await run.say("group:a", "alice", "/stats"))[0]
            assert "Today:" in stats and "3 model calls" in stats and "bob" in stats

            await _check_metrics(run)
        finally:
            await run.stop()

        # A restart: the overrides were stored, and apply to chat A alone.
        run = await _start(config, tmp_path)
        try:
            await run.say("group:a", "bob", "after restart")
            await run.say("group:b", "bob", "after restart")
        finally:
            await run.stop()
        assert len(alpha.bodies()) == 1
        systems = [_system(b).splitlines()[0] for b in beta.bodies()[-2:]]
        assert systems == [HAIKU, LIBRARIAN]
        # The reset point survived too: chat A's model still sees nothing before it.
        assert _texts(beta.bodies()[-2])[0] == "bob: fresh topic"


async def _check_metrics(run: Running) -> None:
    async with ClientSession() as http:
        assert (await http.get(f"{run.url}/metrics")).status == 401
        resp = await http.get(f"{run.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert resp.status == 200 and resp.content_type == "text/plain"
        text = await resp.text()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("chatfn_messages_in_total", (("channel", "http"),))] == 14
    assert samples[("chatfn_messages_out_total", (("channel", "http"),))] == 14
    assert samples[("chatfn_model_requests_total", (("model", "alpha"), ("outcome", "ok")))] == 1
    assert samples[("chatfn_model_requests_total", (("model", "beta"), ("outcome", "ok")))] == 4
    assert samples[("chatfn_model_tokens_total", (("kind", "prompt"), ("model", "beta")))] == 80
    assert samples[("chatfn_model_tokens_total", (("kind", "cached"), ("model", "beta")))] == 32
    assert samples[("chatfn_tool_calls_total", (("function", "model"), ("outcome", "refused")))]
    assert samples[("chatfn_model_latency_seconds_count", (("model", "beta"),))] == 4
    assert ("chatfn_limit_refusals_total", ()) not in samples
