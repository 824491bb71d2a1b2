"""The kit's small text and media helpers, tested on their own: a quoted message as the model
reads it (`kit.quotes`), Markdown as restricted HTML (`kit.html.safe_html`: links only of the
platform's schemes, raw HTML as text), a reply's last part as its image's caption
(`kit.media.caption_from`), and the bot's name in a message (`kit.mentions`)."""

from __future__ import annotations

from chatfn.channels.kit.html import safe_html
from chatfn.channels.kit.media import caption_from
from chatfn.channels.kit.mentions import remove_once, starts_with_word
from chatfn.channels.kit.quotes import QUOTED_CHARS, leading_quote, quote_line

HTTPS = ("https:", "mailto:")


def test_quote_line_cuts_the_text() -> None:
    assert quote_line("Ann", "hello") == "Ann: hello"
    long = "x" * (QUOTED_CHARS + 10)
    assert quote_line("Ann", long) == "Ann: " + "x" * QUOTED_CHARS


def test_leading_quote_takes_the_quoted_lines_and_the_blank_after() -> None:
    body = "> Ann wrote\n>hi there\n\nmy answer\n> not a quote"
    assert leading_quote(body) == ("my answer\n> not a quote", ["Ann wrote", "hi there"])
    assert leading_quote("> only\nanswer") == ("answer", ["only"])
    assert leading_quote("no quote\n> later") == ("no quote\n> later", [])


def test_safe_html_drops_a_javascript_link_and_keeps_an_allowed_one() -> None:
    html = safe_html("[bad](javascript:alert(1)) and [good](https://example.com)", HTTPS)
    assert html.count("<a ") == 1 and 'href="javascript' not in html
    assert '<a href="https://example.com">good</a>' in html


def test_safe_html_escapes_raw_html() -> None:
    html = safe_html('<script>alert(1)</script> <img src=x onerror="y">', HTTPS)
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "&lt;img" in html


def test_safe_html_shows_an_image_as_a_link_only_with_an_allowed_scheme() -> None:
    assert (
        safe_html("![cat](https://x.org/c.png)", HTTPS) == '<a href="https://x.org/c.png">cat</a>'
    )
    # Not an allowed scheme: stays text, as any such link does.
    assert "href" not in safe_html("![cat](http://x.org/c.png)", HTTPS)


def test_safe_html_keeps_lines_and_drops_the_lone_paragraph() -> None:
    assert safe_html("one\ntwo **bold**", HTTPS) == "one<br />\ntwo <strong>bold</strong>"
    assert safe_html("a\n\nb", HTTPS) == "<p>a</p>\n<p>b</p>"


def test_caption_from_takes_the_last_part_only_when_it_fits_and_there_is_media() -> None:
    parts = ["first", "short"]
    assert caption_from(parts, True, lambda text: len(text) < 10) == "short"
    assert parts == ["first"]
    parts = ["first", "far too long a caption"]
    assert caption_from(parts, True, lambda text: len(text) < 10) is None
    assert parts == ["first", "far too long a caption"]
    parts = ["short"]
    assert caption_from(parts, False, lambda text: True) is None and parts == ["short"]
    assert caption_from([], True, lambda text: True) is None


def test_starts_with_word_needs_the_whole_word() -> None:
    assert starts_with_word("  Helper: hi", "Helper")
    assert starts_with_word("Helper", "Helper")
    assert not starts_with_word("Helpers are here", "Helper")
    assert not starts_with_word("Helper_bot hi", "Helper")
    assert not starts_with_word("hi Helper", "Helper")
    assert not starts_with_word("anything", "")


def test_remove_once_takes_out_the_first_only() -> None:
    assert remove_once("@Bot hi @Bot", "@Bot") == (" hi @Bot", True)
    assert remove_once("hi", "@Bot") == ("hi", False)
    assert remove_once("hi", "") == ("hi", False)
