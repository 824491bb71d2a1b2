"""CQ-code strings and segment arrays (OneBot v11 message/string.md and message/array.md)."""

from __future__ import annotations

from chatfn.channels.onebot.message import (
    escape,
    normalize,
    outgoing_segments,
    parse_cq,
    parse_message,
    to_cq,
    unescape,
)

SELF = "10001000"


def test_parse_cq_with_escapes_in_text_and_params() -> None:
    raw = "a &#91;b&#93; &amp; c[CQ:at,qq=123][CQ:share,url=http://x/?a=1&#44;2,title=T&amp;U]end"
    assert parse_cq(raw) == [
        {"type": "text", "data": {"text": "a [b] & c"}},
        {"type": "at", "data": {"qq": "123"}},
        {"type": "share", "data": {"url": "http://x/?a=1,2", "title": "T&U"}},
        {"type": "text", "data": {"text": "end"}},
    ]


def test_round_trip_and_literal_escape_sequences() -> None:
    segments = [
        {"type": "text", "data": {"text": "[x], &#91; & y"}},
        {"type": "image", "data": {"file": "a,b.png"}},
    ]
    assert parse_cq(to_cq(segments)) == segments
    assert unescape(escape("&#91;")) == "&#91;"
    assert escape("a,b", in_param=True) == "a&#44;b"


def test_unclosed_code_is_kept_as_text() -> None:
    assert parse_cq("hi [CQ:at,qq=1") == [{"type": "text", "data": {"text": "hi [CQ:at,qq=1"}}]


def test_normalize_accepts_every_posted_shape() -> None:
    seg = {"type": "text", "data": {"text": "x"}}
    assert normalize([seg]) == normalize(seg) == normalize("x") == [seg]
    assert normalize([{"type": "face"}, "junk", 3]) == [{"type": "face", "data": {}}]
    assert normalize(None) == []


def test_parse_message_mentions_reply_and_placeholders() -> None:
    parsed = parse_message(
        parse_cq(f"[CQ:reply,id=77][CQ:at,qq={SELF}] look[CQ:image,file=a.jpg] [CQ:at,qq=42]ok"),
        SELF,
    )
    assert parsed.at_bot and parsed.reply_id == "77"
    assert parsed.text == "look[image] @42 ok"
    assert parse_message(parse_cq("[CQ:at,qq=all] meeting"), SELF).at_bot is False


def test_outgoing_segments() -> None:
    assert outgoing_segments("hi", at="5", reply_to="9") == [
        {"type": "reply", "data": {"id": "9"}},
        {"type": "at", "data": {"qq": "5"}},
        {"type": "text", "data": {"text": " hi"}},
    ]
    assert outgoing_segments("hi") == [{"type": "text", "data": {"text": "hi"}}]


def test_cq_parse_of_unclosed_codes_is_linear() -> None:
    """Each unclosed `[CQ:` scanned to the end of the message (quadratic: a 48 KB raw message
    held the event loop ~3 s). `[` inside a CQ code is always escaped (&#91;), so a scan can
    stop at the next `[`."""
    import time

    from chatfn.channels.onebot.message import parse_cq

    start = time.perf_counter()
    segments = parse_cq("[CQ:a," * 8000)
    assert time.perf_counter() - start < 0.5
    assert "".join(s["data"]["text"] for s in segments) == "[CQ:a," * 8000
    assert parse_cq("hi[CQ:at,qq=1]x") == [
        {"type": "text", "data": {"text": "hi"}},
        {"type": "at", "data": {"qq": "1"}},
        {"type": "text", "data": {"text": "x"}},
    ]
