"""A long reply as several messages, each within the platform's limit, cut where a reader
would: between paragraphs first, never inside a code block's fence (a block too long for one
message is cut between its lines, and each part is fenced again), then between lines, then
between words, and only a word longer than the limit is hard-cut.

    parts = split_message(text, 4096, render=to_telegram_markdown_v2)

`render` (a converter of chatfn/channels/markdown.py) makes the limit apply to what is sent, since
escaping makes a text longer; `measure` counts as the platform does (Telegram counts UTF-16
code units: `measure=utf16_len`). Each part is Markdown source: render it for sending.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Measure = Callable[[str], int]
Render = Callable[[str], str]

_FENCE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})(.*)$")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (Telegram's and Discord's way of counting)."""
    return len(text.encode("utf-16-le")) // 2


def split_message(
    text: str,
    limit: int,
    *,
    render: Render | None = None,
    measure: Measure = len,
) -> list[str]:
    """`text` (Markdown) in parts whose rendered size is at most `limit` (see the module
    docstring). No part is empty; joined with blank lines they hold the same text."""
    if limit <= 0:
        raise ValueError("limit must be positive")

    def size(part: str) -> int:
        return measure(render(part) if render is not None else part)

    if size(text) <= limit:
        return [text] if text.strip() else []
    parts: list[str] = []
    current = ""
    for block in _blocks(text):
        candidate = f"{current}\n\n{block}" if current else block
        if size(candidate) <= limit:
            current = candidate
            continue
        if current:
            parts.append(current)
            current = ""
        if size(block) <= limit:
            current = block
            continue
        pieces = _split_block(block, limit, size)
        parts.extend(pieces[:-1])
        current = pieces[-1] if pieces else ""
    if current.strip():
        parts.append(current)
    return parts


def _blocks(text: str) -> list[str]:
    """Paragraphs (runs of lines between blank lines), a fenced code block always one block
    however many blank lines it holds."""
    blocks: list[str] = []
    lines: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                if lines:
                    blocks.append("\n".join(lines))
                lines = [line]
                fence = m.group(2)
                continue
            if not line.strip():
                if lines:
                    blocks.append("\n".join(lines))
                lines = []
                continue
            lines.append(line)
        else:
            lines.append(line)
            if m and m.group(2).startswith(fence) and not m.group(3).strip():
                blocks.append("\n".join(lines))
                lines = []
                fence = None
    if lines:
        blocks.append("\n".join(lines))
    return [b for b in blocks if b.strip()]


def _split_block(block: str, limit: int, size: Callable[[str], int]) -> list[str]:
    lines = block.split("\n")
    m = _FENCE.match(lines[0])
    if m and len(lines) > 1:
        opener = lines[0]
        closer = m.group(1) + m.group(2)
        body = lines[1:-1] if _FENCE.match(lines[-1]) else lines[1:]
        return _pack(
            body,
            limit,
            lambda chunk: size(f"{opener}\n{chunk}\n{closer}"),
            True,
            lambda chunk: f"{opener}\n{chunk}\n{closer}",
        )
    return _pack(lines, limit, size, False, lambda chunk: chunk)


def _pack(
    lines: list[str],
    limit: int,
    size: Callable[[str], int],
    code: bool,
    wrap: Callable[[str], str],
) -> list[str]:
    """Lines packed greedily into chunks that fit; a line too long alone is cut between words
    (code: at the limit, keeping every character)."""
    chunks: list[str] = []
    current: str | None = None
    for line in lines:
        candidate = line if current is None else f"{current}\n{line}"
        if size(candidate) <= limit:
            current = candidate
            continue
        if current is not None:
            chunks.append(current)
            current = None
        if size(line) <= limit:
            current = line
            continue
        pieces = _cut_line(line, limit, size, keep_spaces=code)
        chunks.extend(pieces[:-1])
        current = pieces[-1] if pieces else None
    if current is not None and (current.strip() or code):
        chunks.append(current)
    return [wrap(c) for c in chunks if c.strip() or code]


def _cut_line(line: str, limit: int, size: Callable[[str], int], *, keep_spaces: bool) -> list[str]:
    """A line in pieces that fit: at the last space that fits, else at the longest prefix that
    fits (found by bisection, so a multi-byte or escaped character is never cut in two)."""
    pieces: list[str] = []
    rest = line
    while rest and size(rest) > limit:
        lo, hi = 1, len(rest)
        while lo < hi:  # the longest prefix that fits
            mid = (lo + hi + 1) // 2
            if size(rest[:mid]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        cut = lo
        if not keep_spaces:
            space = rest.rfind(" ", 0, cut + 1)
            if space > 0:
                cut = space
        head, rest = rest[:cut], rest[cut:]
        if not keep_spaces:
            head, rest = head.rstrip(" "), rest.lstrip(" ")
        if head:
            pieces.append(head)
    if rest:
        pieces.append(rest)
    return pieces
