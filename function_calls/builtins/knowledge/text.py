"""Text as the keyword index sees it: the words of a passage and of a query, the same way.

Chinese, Japanese and Korean have no spaces between words, so a full-text engine that splits
on whitespace and punctuation (FTS5's unicode61, PostgreSQL's parser) would see a whole
sentence as one "word". Each run of CJK characters is therefore written out as its
overlapping two-character pieces (`研究生命起源` -> `研究 究生 生命 命起 起源` plus the last
character alone), the way Lucene's CJKAnalyzer indexes it, before the engine sees it.

Why bigrams and not a dictionary segmenter (jieba) or FTS5's trigram tokenizer:
- trigram cannot match a query shorter than three characters, and most Chinese words are two
  (`退款`, `三省`): such a query finds nothing;
- a segmenter cuts the same characters differently in different contexts (`研究生命起源` ->
  `研究生/命/起源`, `生命` alone -> `生命`), so a two-character query can miss the passage
  that contains it; it also loads a 20 MB dictionary at start.
Every two-character word is one bigram, found wherever it occurs; a longer word is all of its
bigrams (BM25 ranks the passage holding all of them in a row first); a one-character query is
a prefix search over the bigrams (every character starts one, the run's last one too).

English and other space-separated text is left as words, lowercased; the engine stems it
(FTS5's porter tokenizer, PostgreSQL's `english` configuration).
"""

from __future__ import annotations

import re

# CJK Unified Ideographs (+ extension A, compatibility), kana, hangul.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_PIECE = re.compile(f"[{_CJK}]+|[^\\W_]+(?:['’][^\\W_]+)*", re.UNICODE)
_CJK_CHAR = re.compile(f"[{_CJK}]")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Words a question is made of that say nothing about what is asked; left out of queries (not
# of the index) so "what is the ..." does not match every passage.
STOPWORDS = frozenset(
    """a an and are as at be but by can do does for from has have how i if in into is it its
    me my of on or so than that the their then there these this those to was were what when
    where which who whom why will with would you your about tell please explain""".split()
)


def cjk_pieces(run: str) -> list[str]:
    """The overlapping bigrams of a CJK run, and its last character alone."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


def index_text(text: str) -> str:
    """`text` as the keyword index stores it: words as they are, CJK runs as bigrams."""
    out: list[str] = []
    for m in _PIECE.finditer(text):
        piece = m.group(0)
        if _CJK_CHAR.match(piece):
            out.extend(cjk_pieces(piece))
        else:
            out.append(piece.lower())
    return " ".join(out)


def query_terms(query: str) -> list[tuple[str, bool]]:
    """(term, is a prefix) of a user's or the model's query, deduplicated, stopwords out.
    A CJK run gives its bigrams (one character: that character as a prefix)."""
    terms: list[tuple[str, bool]] = []
    seen: set[str] = set()
    pieces = [m.group(0) for m in _PIECE.finditer(query)]
    words = [p.lower() for p in pieces if not _CJK_CHAR.match(p)]
    # "the who": nothing but stopwords, so keep what there is
    keep_stop = len(words) == len(pieces) and all(w in STOPWORDS for w in words)
    for piece in pieces:
        if _CJK_CHAR.match(piece):
            found = (
                [(piece, True)] if len(piece) == 1 else [(b, False) for b in cjk_pieces(piece)[:-1]]
            )
        else:
            word = piece.lower()
            found = [] if (word in STOPWORDS and not keep_stop) else [(word, False)]
        for term, prefix in found:
            if term not in seen:
                seen.add(term)
                terms.append((term, prefix))
    return terms


def fts5_query(query: str | list[tuple[str, bool]]) -> str | None:
    """An FTS5 MATCH expression: every term quoted (no operator of the user's survives),
    joined with OR (BM25 ranks passages holding more of them first). None: nothing to find."""
    terms = query_terms(query) if isinstance(query, str) else query
    if not terms:
        return None
    parts = []
    for term, prefix in terms:
        quoted = '"' + term.replace('"', '""') + '"'
        parts.append(quoted + ("*" if prefix else ""))
    return " OR ".join(parts)


def tsquery(query: str) -> str | None:
    """A PostgreSQL `to_tsquery` expression with the same terms: each single-quoted, OR."""
    terms = query_terms(query)
    if not terms:
        return None
    parts = []
    for term, prefix in terms:
        quoted = "'" + term.replace("'", "''").replace("\\", "") + "'"
        parts.append(quoted + (":*" if prefix else ""))
    return " | ".join(parts)


def estimate_tokens(text: str) -> int:
    """Tokens of `text` as a model would count them, roughly: a CJK character one, a word
    four thirds (so chunk sizes mean the same in both scripts)."""
    cjk = sum(len(r) for r in _CJK_RUN.findall(text))
    words = len(_WORD.findall(_CJK_RUN.sub(" ", text)))
    return cjk + (words * 4 + 2) // 3
