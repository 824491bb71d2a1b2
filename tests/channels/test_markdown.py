"""chatfn/channels/markdown.py and chatfn/channels/split.py: the model's Markdown as each
platform's format,
and long replies cut where a reader would. Telegram's parsers are modelled from its Bot API
documentation (tests/channels/telegram/telegram_markup.py): whatever the model writes, Telegram must
not refuse the message."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatfn.channels.markdown import (
    to_discord,
    to_matrix_html,
    to_plain,
    to_slack_mrkdwn,
    to_telegram_html,
    to_telegram_markdown_v2,
)
from chatfn.channels.split import split_message, utf16_len
from tests.channels.telegram.telegram_markup import (
    MarkupError,
    parse_markdown_v2,
    parse_telegram_html,
)

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
SPECIALS = "_*[]()~`>#+-=|{}.!\\"
nasty = st.text(alphabet=SPECIALS + "ab 1\n", max_size=200)
prose = st.text(
    alphabet=st.sampled_from(list("_*~`>#+-=|{}.!abcXYZ 12\n")) | st.characters(codec="utf-8"),
    max_size=300,
)

REPLY = """# Plan

Use **bold**, _italics_, ~~old~~ and `code_with_underscores`; see [the docs](https://ex.com/a_(b)).

1. First (1.5x faster!)
2. Second - with a {brace} and a |pipe| #tag

> a quote = 3 > 2

```python
def f(x):  # *not* bold
    return x ** 2 `tick`
```
"""


@settings(max_examples=300, deadline=None)
@given(nasty)
def test_a_reply_full_of_specials_is_valid_markdown_v2(text: str) -> None:
    out = to_telegram_markdown_v2(text)
    parse_markdown_v2(out)  # raises where Telegram would refuse the message


@settings(max_examples=200, deadline=None)
@given(prose)
def test_markdown_v2_and_html_keep_the_text(text: str) -> None:
    """Without links (whose URL is in the entity, not the text) what Telegram shows is the
    plain rendering: nothing lost, nothing added."""
    if "[" in text or "<" in text:
        return
    assert parse_markdown_v2(to_telegram_markdown_v2(text)) == to_plain(text)
    assert parse_telegram_html(to_telegram_html(text)) == to_plain(text)


@settings(max_examples=200, deadline=None)
@given(nasty)
def test_telegram_html_is_always_valid(text: str) -> None:
    parse_telegram_html(to_telegram_html(text))


def test_formatting_arrives_as_the_platforms_own() -> None:
    v2 = to_telegram_markdown_v2(REPLY)
    assert "*bold*" in v2 and "_italics_" in v2 and "~old~" in v2
    assert "`code_with_underscores`" in v2 and "[the docs](https://ex.com/a_(b\\))" in v2
    assert "1\\.5x faster\\!" in v2 and "```python\n" in v2 and "x \\*\\* 2" not in v2
    assert ">a quote \\= 3 \\> 2" in v2
    parse_markdown_v2(v2)
    h = to_telegram_html(REPLY)
    assert "<b>bold</b>" in h and "<i>italics</i>" in h and "<s>old</s>" in h
    assert '<a href="https://ex.com/a_(b)">the docs</a>' in h
    assert '<pre><code class="language-python">' in h
    parse_telegram_html(h)
    slack = to_slack_mrkdwn(REPLY)
    assert "*bold*" in slack and "_italics_" in slack and "~old~" in slack
    assert "<https://ex.com/a_(b)|the docs>" in slack and "3 &gt; 2" in slack
    discord = to_discord(REPLY)
    assert "**bold**" in discord and "*italics*" in discord and "~~old~~" in discord
    assert "[the docs](<https://ex.com/a_(b)>)" in discord and "# Plan" in discord
    matrix = to_matrix_html(REPLY)
    assert "<strong>bold</strong>" in matrix and '<a href="https://ex.com/a_(b)">' in matrix
    plain = to_plain(REPLY)
    assert "Use bold, italics, old and code_with_underscores" in plain
    assert "the docs (https://ex.com/a_(b))" in plain and "x ** 2" in plain


@pytest.mark.parametrize("render", [to_telegram_html, to_slack_mrkdwn, to_matrix_html])
def test_raw_html_from_the_model_is_text(render) -> None:
    out = render("<script>alert(1)</script> & <b>x</b>")
    assert "<script>" not in out and "<b>x</b>" not in out
    assert "alert(1)" in html.unescape(out)


def test_adjacent_italics_are_not_underline() -> None:
    out = to_telegram_markdown_v2("*a*_b_")
    assert parse_markdown_v2(out) == "ab"
    with pytest.raises(MarkupError):  # what it would be without the separator: underline
        parse_markdown_v2("_a__b_")


def test_a_refusing_parser_is_a_real_check() -> None:
    for bad in ("1.5", "(x)", "*open", "`a", "[a](b", "a_b", "<b>x</i>"):
        with pytest.raises(MarkupError):
            if bad.startswith("<"):
                parse_telegram_html(bad)
            else:
                parse_markdown_v2(bad)


# -- splitting ------------------------------------------------------------------------------
def test_splits_between_paragraphs_and_keeps_code_blocks_fenced() -> None:
    code = "```py\n" + "\n".join(f"x{i} = {i}" for i in range(40)) + "\n```"
    text = f"Intro paragraph.\n\n{code}\n\nOutro *done*."
    parts = split_message(text, 150, render=to_telegram_markdown_v2)
    assert parts[0] == "Intro paragraph." and parts[-1].endswith("\n\nOutro *done*.")
    assert len(parts) >= 4
    for part in parts[1:]:
        assert part.startswith("```py\n")  # every piece of the block is fenced again
        code = part.split("\n\nOutro")[0]
        assert code.endswith("\n```") and code.count("```") == 2
        assert len(to_telegram_markdown_v2(part)) <= 150
        parse_markdown_v2(to_telegram_markdown_v2(part))
    lines = [ln for p in parts[1:] for ln in p.split("\n\nOutro")[0].split("\n")[1:-1]]
    assert lines == [f"x{i} = {i}" for i in range(40)]


def test_a_blank_line_inside_a_code_block_is_no_paragraph_break() -> None:
    text = "```\na\n\nb\n```\n\nafter"
    assert split_message(text, 12) == ["```\na\n\nb\n```", "after"]


def test_long_lines_break_between_words_and_long_words_are_cut() -> None:
    words = " ".join(["word"] * 50)
    parts = split_message(words, 32)
    assert all(len(p) <= 32 for p in parts) and " ".join(parts).split() == words.split()
    assert split_message("x" * 70, 30) == ["x" * 30, "x" * 30, "x" * 10]


def _content(text: str) -> str:
    """The characters that must survive a split: all but whitespace and fence lines."""
    lines = [ln for ln in text.split("\n") if not FENCE.match(ln)]
    return "".join("".join(lines).split())


@settings(max_examples=200, deadline=None)
@given(prose, st.integers(min_value=20, max_value=120))
def test_every_part_fits_and_nothing_is_lost(text: str, limit: int) -> None:
    parts = split_message(text, limit, render=to_telegram_markdown_v2, measure=utf16_len)
    for part in parts:
        assert part.strip()
        assert utf16_len(to_telegram_markdown_v2(part)) <= limit
    assert _content("\n".join(parts)) == _content(text)


def test_utf16_counts_as_telegram_does() -> None:
    assert utf16_len("a😀") == 3 and utf16_len("中文") == 2
    parts = split_message("😀" * 10, 8, measure=utf16_len)
    assert parts == ["😀" * 4, "😀" * 4, "😀" * 2]
