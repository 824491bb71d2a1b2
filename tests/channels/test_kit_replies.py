"""The kit's replies for a platform that takes replies only as answers (`kit.replies`),
tested on their own with a tiny platform: what a reply answers inside and after the passive
reply window, an active message when nothing is left to answer, the replies a message still
takes (a row sent again counted once), a reply the platform already has delivered, and a
reply sent again as an active message (the window passed) or with its links replaced."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from chatfn.channels.kit.keys import part_seq
from chatfn.channels.kit.replies import (
    Answer,
    AnswerSender,
    LinkRefused,
    ReplyWindow,
    WindowPassed,
    fit_replies,
    unlinked,
)
from chatfn.channels.kit.sender import ChatTarget, Owed
from chatfn.common.messages import DeliveryRefused, OutgoingMessage
from chatfn.runtime.channel_host import DeliveryPolicy

WINDOW = 300.0


class Duplicate(Exception):
    """The platform's "this sequence number was sent already"."""


class Answering(AnswerSender[ChatTarget], platform="answering", label="Answering"):
    link_fix = "register the domain in the console"
    active_note = " (it may be refused)"
    cut_note = " [cut]"
    seq_name = "msg_seq"

    def parse_chat(self, chat_id: str) -> ChatTarget:
        kind, _, target = chat_id.partition(":")
        return ChatTarget(kind == "group", target)

    async def send_parts(self, ref: ChatTarget, out: OutgoingMessage, owed: Owed) -> Any:
        return None

    def window(self, ref: ChatTarget) -> float:
        return WINDOW

    def counted(self, ref: ChatTarget) -> bool:
        return ref.is_group

    def duplicate(self, exc: Exception) -> bool:
        return isinstance(exc, Duplicate)


GROUP = ChatTarget(True, "g1")
PRIVATE = ChatTarget(False, "u1")


def sender(max_replies: int = 5) -> Answering:
    policy = DeliveryPolicy(retry_pause=0.001)
    return Answering(None, SimpleNamespace(), policy, ReplyWindow(max_replies))


def test_a_reply_inside_the_window_answers_its_message() -> None:
    s = sender()
    s.shared.message(GROUP.key, "m1")
    assert s.answer(GROUP, "m1") == Answer("m1")


def test_a_reply_to_a_message_not_seen_answers_it_after_a_restart() -> None:
    assert sender().answer(GROUP, "unknown") == Answer("unknown")


def test_a_reply_past_the_window_goes_as_an_active_message(logs: list[str]) -> None:
    s = sender()
    s.shared.message(GROUP.key, "m1", at=time.time() - WINDOW - 100)
    answer = s.answer(GROUP, "m1")
    assert answer.msg_id is None and answer.event_id is None
    assert answer.late is not None and 399 <= answer.late <= 402
    (line,) = logs
    assert line.startswith("WARNING Answering: the reply to message m1 in group:g1 comes 4")
    assert "past the passive reply window (300 s)" in line
    assert line.endswith("sending it as an active message (it may be refused)")


def test_the_active_note_is_said_only_where_replies_are_counted(logs: list[str]) -> None:
    s = sender()
    s.shared.message(PRIVATE.key, "m1", at=time.time() - WINDOW - 100)
    s.answer(PRIVATE, "m1")
    assert logs[0].endswith("sending it as an active message")


def test_without_reply_to_the_chats_newest_message_is_answered() -> None:
    s = sender()
    s.shared.message(GROUP.key, "old")
    s.shared.message(GROUP.key, "new")
    s.shared.message(PRIVATE.key, "elsewhere")
    assert s.answer(GROUP, None) == Answer("new")


def test_without_a_message_the_newest_event_in_the_window_is_answered() -> None:
    s = sender()
    s.shared.message(GROUP.key, "stale", at=time.time() - WINDOW - 1)
    s.shared.event(GROUP.key, "e1")
    assert s.answer(GROUP, None) == Answer(event_id="e1")


def test_nothing_to_answer_is_an_active_message_said(logs: list[str]) -> None:
    s = sender()
    s.shared.event(GROUP.key, "old", at=time.time() - WINDOW - 1)
    assert s.answer(GROUP, None) == Answer()
    assert logs == [
        "INFO Answering: nothing in group:g1 to answer within the passive reply window: "
        "sending an active message (it may be refused)"
    ]


async def test_a_reply_the_platform_has_already_is_delivered(logs: list[str]) -> None:
    s = sender()

    async def call() -> Any:
        raise Duplicate("seq 1 used")

    assert await s.post(GROUP, call) is None
    assert logs == [
        "INFO Answering already has this message to group:g1 (duplicate msg_seq): delivered"
    ]


async def test_post_returns_the_answer_and_raises_any_other_error() -> None:
    s = sender()

    async def ok() -> Any:
        return {"id": "x"}

    async def refused() -> Any:
        raise DeliveryRefused("no such chat")

    assert await s.post(GROUP, ok) == {"id": "x"}
    with pytest.raises(DeliveryRefused, match="no such chat"):
        await s.post(GROUP, refused)


def test_took_counts_a_reply_only_where_replies_are_counted() -> None:
    s = sender(max_replies=2)
    s.took(GROUP, Answer("m1"), 1)
    s.took(PRIVATE, Answer("m2"), 1)
    s.took(GROUP, Answer(), 3)  # an active message answers nothing: not counted
    assert s.shared.room("m1", []) == 1
    assert s.shared.room("m2", []) == 2


def test_has_room_until_the_message_takes_no_more(logs: list[str]) -> None:
    s = sender(max_replies=1)
    assert s.has_room(GROUP, Answer("m1"), 1, "an image")
    s.took(GROUP, Answer("m1"), 1)
    assert s.has_room(GROUP, Answer("m1"), 1, "an image")  # the same reply sent again
    assert not s.has_room(GROUP, Answer("m1"), 2, "an image")
    assert logs == ["WARNING Answering: no reply left to m1 in group:g1 for an image"]
    assert s.has_room(GROUP, Answer(), 9, "an image")  # an active message: no count


def test_within_keeps_a_row_that_fits_and_counts_a_row_sent_again_once() -> None:
    s = sender(max_replies=2)
    parts = ["one", "two"]
    for i in range(2):
        s.took(GROUP, Answer("m1"), part_seq(7, i))
    # Row 7 again: its own parts do not count against it.
    assert s.within(GROUP, "m1", 7, parts, [], 100) == (parts, [])


def test_within_cuts_a_reply_to_the_room_left(logs: list[str]) -> None:
    s = sender(max_replies=3)
    s.took(GROUP, Answer("m1"), part_seq(1, 0))
    parts, extras = s.within(GROUP, "m1", 2, ["a", "b", "c"], ["img"], 10)
    assert (parts, extras) == (["a [cut]"], ["img"])
    assert logs[0].startswith("WARNING Answering: the reply to m1 in group:g1 needs 4 messages")


def test_within_drops_a_reply_with_no_room_left() -> None:
    s = sender(max_replies=1)
    dropped: list[str] = []
    s.dropped = dropped.append
    s.took(GROUP, Answer("m1"), part_seq(1, 0))
    with pytest.raises(DeliveryRefused, match="already has the 1 replies Answering takes"):
        s.within(GROUP, "m1", 2, ["a"], [], 10)
    assert dropped == ["reply_limit"]


def test_fit_replies_keeps_text_and_ends_it_with_the_note() -> None:
    assert fit_replies(["a", "b"], [1], 3, 10, "!") == (["a", "b"], [1])
    assert fit_replies(["a", "b"], [1, 2], 2, 10, "!") == (["a!"], [1])
    assert fit_replies(["abcdefghij"], [], 1, 5, "..") == (["abcdefghij"], [])
    assert fit_replies(["abcdefghij", "x"], [], 1, 5, "..") == (["abc.."], [])
    assert fit_replies([], [1, 2, 3], 2, 5, "..") == ([], [1, 2])


async def test_a_passed_window_is_sent_again_as_an_active_message(logs: list[str]) -> None:
    s = sender()
    sent: list[Answer] = []

    async def send(answer: Answer) -> None:
        sent.append(answer)
        if answer.msg_id:
            raise WindowPassed()

    await s.answering(GROUP, Answer("m1"), send)
    assert sent == [Answer("m1"), Answer()]
    assert "the passive reply window of m1 in group:g1 has passed (Answering said so)" in logs[0]


async def test_an_active_message_refused_too_is_refused() -> None:
    async def send(answer: Answer) -> None:
        raise WindowPassed()

    with pytest.raises(DeliveryRefused, match="Answering refused an active message to group:g1"):
        await sender().answering(GROUP, Answer("m1"), send)


async def test_a_refused_link_is_sent_again_unlinked_and_said_once(logs: list[str]) -> None:
    s = sender()
    plain: list[Answer] = []

    async def send(answer: Answer) -> None:
        raise LinkRefused()

    async def without_links(answer: Answer) -> None:
        plain.append(answer)

    await s.answering(GROUP, Answer("m1"), send, without_links)
    await s.answering(GROUP, Answer("m2"), send, without_links)
    assert plain == [Answer("m1"), Answer("m2")]
    told = [line for line in logs if "refused a link" in line]
    assert told == [
        "WARNING Answering refused a link in a message to group:g1 (register the domain in "
        "the console): sent with the links replaced by [link]"
    ]


async def test_a_refused_link_without_an_unlinked_send_is_refused() -> None:
    async def send(answer: Answer) -> None:
        raise LinkRefused()

    with pytest.raises(DeliveryRefused, match="Answering refused a URL in the message to group:g1"):
        await sender().answering(GROUP, Answer("m1"), send)


def test_unlinked_replaces_urls_and_bare_domains() -> None:
    text = "see https://example.com/a?b=1, or docs.example.org. Thanks (http://x.io)"
    assert unlinked(text) == "see [link], or [link]. Thanks ([link])"
