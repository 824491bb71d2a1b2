"""Sections cut into passages of about `chunk_tokens` each, never across a heading.

A passage is what the model reads and what a citation points at, so it is cut at the
document's own seams: paragraphs first, then sentences (Chinese `。！？` too), and only a
sentence longer than a whole passage is cut inside.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from function_calls.builtins.knowledge.readers import Section
from function_calls.builtins.knowledge.text import estimate_tokens

_PARAGRAPHS = re.compile(r"\n\s*\n")
_SENTENCES = re.compile(r"(?<=[.!?。！？；;])\s+|(?<=[。！？；])")


@dataclass(frozen=True, slots=True)
class Chunk:
    heading: str
    text: str


def _pieces(text: str, limit: int) -> Iterable[str]:
    """Paragraphs, or the sentences of one too long, or slices of one sentence too long."""
    for para in _PARAGRAPHS.split(text):
        para = para.strip()
        if not para:
            continue
        if estimate_tokens(para) <= limit:
            yield para
            continue
        for sentence in _SENTENCES.split(para):
            sentence = sentence.strip()
            if not sentence:
                continue
            if estimate_tokens(sentence) <= limit:
                yield sentence
                continue
            step = max(20, len(sentence) * limit // max(1, estimate_tokens(sentence)))
            for i in range(0, len(sentence), step):
                yield sentence[i : i + step]


def chunk(sections: Iterable[Section], chunk_tokens: int) -> list[Chunk]:
    """Passages of at most about `chunk_tokens`, in document order."""
    out: list[Chunk] = []
    for section in sections:
        parts: list[str] = []
        size = 0
        for piece in _pieces(section.text, chunk_tokens):
            tokens = estimate_tokens(piece)
            if parts and size + tokens > chunk_tokens:
                out.append(Chunk(section.heading, "\n\n".join(parts)))
                parts, size = [], 0
            parts.append(piece)
            size += tokens
        if parts:
            out.append(Chunk(section.heading, "\n\n".join(parts)))
    return out
