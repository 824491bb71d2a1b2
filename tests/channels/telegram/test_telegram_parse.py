"""Telegram chat ids and addressing (chatfn/channels/telegram/parse.py) on Bot API Message objects
parsed by python-telegram-bot: entity offsets in UTF-16, commands for this and other bots,
text mentions, forum topics."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("telegram")

from telegram import Message  # noqa: E402

from chatfn.channels.telegram.parse import ChatRef, address, chat_ref, parse_chat_id  # noqa: E402

BOT = 42
NAME = "my_bot"


def message(text: str, entities: list[dict[str, Any]] = (), **extra: Any) -> Message:  # type: ignore[assignment]
    data: dict[str, Any] = {
        "message_id": 1,
        "date": 1700000000,
        "chat": {"id": -100123, "type": "supergroup", "title": "g"},
        "from": {"id": 7, "is_bot": False, "first_name": "Ann"},
        "text": text,
        "entities": list(entities),
        **extra,
    }
    parsed = Message.de_json(data, None)
    assert parsed is not None
    return parsed


def entity(kind: str, text: str, piece: str, **extra: Any) -> dict[str, Any]:
    """The entity of `piece` in `text`, its offset and length in UTF-16 code units."""
    start = len(text[: text.index(piece)].encode("utf-16-le")) // 2
    return {"type": kind, "offset": start, "length": len(piece.encode("utf-16-le")) // 2, **extra}


def test_a_mention_after_astral_characters_is_cut_in_utf16() -> None:
    text = "\U0001f468\u200d\U0001f469 hey @My_Bot, look"
    said = address(message(text, [entity("mention", text, "@My_Bot")]), BOT, NAME)
    assert said.at_bot and said.text == "\U0001f468\u200d\U0001f469 hey , look"


def test_another_users_mention_is_kept_and_does_not_address_the_bot() -> None:
    text = "ask @someone_else"
    said = address(message(text, [entity("mention", text, "@someone_else")]), BOT, NAME)
    assert not said.at_bot and said.text == text


def test_a_text_mention_of_the_bot() -> None:
    text = "Helper, what now"
    user = {"id": BOT, "is_bot": True, "first_name": "Helper"}
    said = address(message(text, [entity("text_mention", text, "Helper", user=user)]), BOT, NAME)
    assert said.at_bot and said.text == ", what now"


def test_commands_for_this_bot_any_bot_and_another_bot() -> None:
    mine = "/persona@MY_BOT pirate"
    said = address(message(mine, [entity("bot_command", mine, "/persona@MY_BOT")]), BOT, NAME)
    assert said.at_bot and said.text == "/persona pirate" and not said.other_bot
    bare = "/help"
    said = address(message(bare, [entity("bot_command", bare, "/help")]), BOT, NAME)
    assert said.at_bot and said.text == "/help"
    other = "/help@other_bot"
    said = address(message(other, [entity("bot_command", other, other)]), BOT, NAME)
    assert said.other_bot and not said.at_bot


def test_replies_to_the_bot_address_it_but_a_topics_root_does_not() -> None:
    bots = {"message_id": 5, "date": 1, "chat": {"id": -100123, "type": "supergroup"},
            "from": {"id": BOT, "is_bot": True, "first_name": "B"}, "text": "earlier"}  # fmt: skip
    assert address(message("and?", reply_to_message=bots), BOT, NAME).at_bot
    root = {**bots, "text": None, "forum_topic_created": {"name": "t", "icon_color": 1}}
    assert not address(message("and?", reply_to_message=root), BOT, NAME).at_bot


def test_chat_ids_and_topics() -> None:
    plain = message("x")
    assert chat_ref(plain).key == "group:-100123"
    in_topic = message("x", message_thread_id=9, is_topic_message=True)
    assert chat_ref(in_topic).key == "group:-100123:topic:9"
    # A reply thread in a group that is not a forum: the group itself.
    assert chat_ref(message("x", message_thread_id=9)).key == "group:-100123"
    private = message("x", chat={"id": 7, "type": "private", "first_name": "Ann"})
    assert chat_ref(private) == ChatRef(7)
    for ref in (ChatRef(7), ChatRef(-100123, None, True), ChatRef(-100123, 9, True)):
        assert parse_chat_id(ref.key) == ref
    with pytest.raises(ValueError, match="not a Telegram chat id"):
        parse_chat_id("group:abc")
