"""The way in: the message a user's message quotes (answers), read the one way on every
platform. A platform that sends the quoted message along gives its sender and words, shown
to the model as one line; a platform whose clients write the quote into the body itself (the
lines quoted with `>` before the answer) has it taken out of the text and kept as the quote.
What is the platform's own: where the quoted message is, and how its sender is written."""

from __future__ import annotations

__all__ = ["QUOTED_CHARS", "leading_quote", "quote_line"]

#: The most characters of a quoted message's text the model is shown.
QUOTED_CHARS = 500


def quote_line(sender: str, text: str) -> str:
    """The quoted message as the model reads it: `sender: text`, the text cut to QUOTED_CHARS."""
    return f"{sender}: {text[:QUOTED_CHARS]}"


def leading_quote(body: str) -> tuple[str, list[str]]:
    """(`body` without the lines quoted with `>` it begins with and the blank line after them;
    those lines without their `>` or `> `); (`body`, []) when it begins with none."""
    lines = body.split("\n")
    quoted: list[str] = []
    i = 0
    while i < len(lines) and lines[i].startswith(">"):
        quoted.append(lines[i][2:] if lines[i].startswith("> ") else lines[i][1:])
        i += 1
    if not quoted:
        return body, []
    if i < len(lines) and lines[i].strip() == "":
        i += 1
    return "\n".join(lines[i:]), quoted
