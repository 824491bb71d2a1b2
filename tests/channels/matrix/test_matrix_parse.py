"""The Matrix channel's pure parts, without a homeserver: Markdown as the spec's HTML (escaped,
sanitised), mentions, pills and reply fallbacks as clients write them
(https://spec.matrix.org/v1.16/client-server-api/#user-and-room-mentions, #rich-replies),
chat ids, transaction ids, splitting within an event's bytes, the settings' errors, and the
legacy media download on a homeserver without authenticated media."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from aiohttp import web

pytest.importorskip("nio")

from chatfn.channels.matrix.format import to_body, to_html  # noqa: E402
from chatfn.channels.matrix.parse import parse_chat_id, read_content  # noqa: E402
from chatfn.channels.matrix.send import EVENT_BUDGET, MatrixSender, transaction_id  # noqa: E402
from chatfn.channels.matrix.settings import MatrixSettings  # noqa: E402
from chatfn.common.messages import OutgoingMessage  # noqa: E402
from tests.channels.conftest import serve  # noqa: E402
from tests.channels.contract import PNG, STYLED  # noqa: E402

BOT = "@bot:example.org"


def test_markdown_becomes_the_specs_html_with_a_plain_body() -> None:
    html = to_html(STYLED)
    assert "<strong>bold</strong>" in html and "<em>italics</em>" in html
    assert "<code>code_here</code>" in html
    assert '<a href="https://example.com/x_(y)">a link</a>' in html
    assert to_body(STYLED) == (
        "Some bold, some italics, code_here and a link (https://example.com/x_(y))."
    )


def test_html_from_the_model_is_text_and_links_keep_to_the_allowed_schemes() -> None:
    html = to_html(
        '<script>alert(1)</script> <img src=x onerror="a()"> & [x](javascript:alert(1)) '
        "[t](tel:123) ![pic](https://e.org/p.png) ![bad](data:image/png;base64,AA)"
    )
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "<img" not in html and "&lt;img" in html and "&amp;" in html
    assert 'href="javascript' not in html and 'href="tel' not in html
    assert '<a href="https://e.org/p.png">pic</a>' in html  # img may only show mxc://
    assert 'href="data:' not in html


def test_lines_stay_lines_and_code_is_escaped() -> None:
    assert to_html("one\ntwo") == "one<br />\ntwo"
    assert to_html("```python\nif a < b and c > d: pass\n```") == (
        '<pre><code class="language-python">if a &lt; b and c &gt; d: pass\n</code></pre>'
    )


def test_m_mentions_and_pills_are_the_bots_mention_and_are_removed() -> None:
    pill = f'<a href="https://matrix.to/#/{BOT}">Helper</a>'
    got = read_content(
        {
            "body": "Helper: what time is it",
            "format": "org.matrix.custom.html",
            "formatted_body": f"{pill}: what time is it",
            "m.mentions": {"user_ids": [BOT]},
        },
        BOT,
        ["Helper"],
    )
    assert got.mentioned and got.text == "what time is it"
    # A percent-encoded pill, or a matrix: URI, without m.mentions (older clients).
    for href in ("https://matrix.to/#/%40bot%3Aexample.org", "matrix:u/bot:example.org"):
        got = read_content(
            {
                "body": "hey Helper, ping",
                "format": "org.matrix.custom.html",
                "formatted_body": f'hey <a href="{href}">Helper</a>, ping',
            },
            BOT,
            [],
        )
        assert got.mentioned and got.text == "hey , ping"


def test_legacy_names_count_only_without_m_mentions() -> None:
    assert read_content({"body": f"{BOT} hi"}, BOT, []).text == "hi"
    assert read_content({"body": "Helper, hi"}, BOT, ["Helper"]).mentioned
    assert not read_content({"body": "Helpers are nice"}, BOT, ["Helper"]).mentioned
    other = {"body": "Helper: hi", "m.mentions": {"user_ids": ["@someone:example.org"]}}
    got = read_content(other, BOT, ["Helper"])
    assert not got.mentioned and got.text == "Helper: hi"
    assert not read_content({"body": "hi", "m.mentions": {}}, BOT, ["Helper"]).mentioned


def test_reply_fallbacks_are_removed_and_kept_as_the_quote() -> None:
    got = read_content(
        {
            "body": "> <@alice:example.org> the old words\n> second line\n\nmy answer",
            "format": "org.matrix.custom.html",
            "formatted_body": "<mx-reply><blockquote>the old words</blockquote></mx-reply>"
            "my answer",
            "m.relates_to": {"m.in_reply_to": {"event_id": "$abc"}},
        },
        BOT,
        [],
    )
    assert got.reply_to == "$abc" and got.text == "my answer"
    assert got.quoted == "the old words\nsecond line"
    assert got.quoted_sender == "@alice:example.org"
    # Quote marks without m.in_reply_to are the user's own Markdown quote: kept.
    assert read_content({"body": "> a quote\n\nmine"}, BOT, []).text == "> a quote\n\nmine"
    # A thread's fallback in_reply_to is not a reply.
    thread = {
        "body": "in thread",
        "m.relates_to": {
            "rel_type": "m.thread",
            "event_id": "$root",
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": "$last"},
        },
    }
    assert read_content(thread, BOT, []).reply_to is None


def test_chat_ids_hold_the_room_id() -> None:
    assert parse_chat_id("group:!abc:example.org").room_id == "!abc:example.org"
    ref = parse_chat_id("private:!Hash0123456789")  # room version 12: no server part
    assert not ref.is_group and ref.key == "private:!Hash0123456789"
    for bad in ("group:abc", "room:!a:b", "private:", "!a:b"):
        with pytest.raises(ValueError, match="private:!room:server"):
            parse_chat_id(bad)


def test_transaction_ids_repeat_for_the_same_row_and_part_only() -> None:
    out = OutgoingMessage(platform="matrix", chat_id="group:!a:b", text="x", event_id=42)
    assert transaction_id(out, 0, "hello") == transaction_id(out, 0, "hello")
    assert transaction_id(out, 0, "hello") != transaction_id(out, 1, "hello")
    assert transaction_id(out, 0, "hello") != transaction_id(out, 0, "other words")
    assert transaction_id(out, 0, "hello").startswith("chatfn-42-0-")
    direct = OutgoingMessage(platform="matrix", chat_id="group:!a:b", text="x")
    assert transaction_id(direct, 0, "x") != transaction_id(direct, 0, "x")


def test_splitting_keeps_each_event_within_its_bytes() -> None:
    sender = MatrixSender(None, MatrixSettings())  # type: ignore[arg-type]
    # 3-byte characters, and escaping that makes the HTML longer than the Markdown.
    text = "\n\n".join(("汉字" * 40 + " a<b & c ") * 200 for _ in range(4))
    parts = sender.split(text)
    assert len(parts) > 4  # 16000 characters would be ~94 KB: the bytes cut it
    for part in parts:
        assert len(to_body(part)) <= 16000
        assert len(to_body(part).encode()) + len(to_html(part).encode()) <= EVENT_BUDGET
    assert " ".join(parts).split() == text.split()  # cut between words, nothing lost


def test_settings_errors_name_the_key() -> None:
    with pytest.raises(ValueError, match="@bot:example.org"):
        MatrixSettings(user_id="bot")
    with pytest.raises(ValueError, match="homeserver"):
        MatrixSettings(homeserver="matrix.example.org")
    assert MatrixSettings().problem() == (
        "channels.matrix.homeserver is not set (e.g. https://matrix.example.org)"
    )
    half = MatrixSettings(homeserver="https://m.org", user_id="@b:m.org")
    assert "channels.matrix.access_token or channels.matrix.password" in (half.problem() or "")


async def test_media_falls_back_to_the_legacy_api_without_authenticated_media() -> None:
    """A homeserver older than Matrix 1.11 answers the v1 media path M_UNRECOGNIZED."""
    seen: list[tuple[str, str]] = []

    async def v1(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get("Authorization", "")))
        return web.json_response({"errcode": "M_UNRECOGNIZED", "error": "no"}, status=404)

    async def legacy(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get("Authorization", "")))
        return web.Response(body=PNG, content_type="image/png")

    app = web.Application()
    app.router.add_get("/_matrix/client/v1/media/download/{server}/{media}", v1)
    app.router.add_get("/_matrix/media/v3/download/{server}/{media}", legacy)
    runner, port = await serve(app)
    from chatfn.channels.matrix.login import make_client
    from chatfn.channels.matrix.media import download

    settings = MatrixSettings(homeserver=f"http://127.0.0.1:{port}", user_id=BOT)
    client = make_client(settings)
    client.access_token = "syt_token"
    try:
        got = await download(client, {"url": "mxc://example.org/abcDEF"}, 5 * 1024 * 1024)
    finally:
        await client.close()
        await runner.cleanup()
    assert got == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert seen == [
        ("/_matrix/client/v1/media/download/example.org/abcDEF", "Bearer syt_token"),
        ("/_matrix/media/v3/download/example.org/abcDEF", "Bearer syt_token"),
    ]


def test_readme_documents_the_channel_and_every_key() -> None:
    from chatfn.channels.matrix import SPEC

    root = Path(__file__).resolve().parents[3]
    # The channel's README is the Matrix section of docs/running-channels.md, its heading one
    # level up and its links relative to docs/.
    page = (root / "docs" / "running-channels.md").read_text(encoding="utf-8")
    assert SPEC.readme.replace("### ", "## ", 1).replace("](docs/", "](") in page
    for key in MatrixSettings.model_fields:
        assert f"`{key}`" in SPEC.readme or f"channels.matrix.{key}" in SPEC.readme, key
