"""Text as the keyword index sees it: the words of a passage and of a query.

Chinese, Japanese and Korean have no spaces between words, so a full-text engine that splits
on whitespace and punctuation (FTS5's unicode61, PostgreSQL's parser) would see a whole
sentence as one "word". Each run of CJK characters is therefore written out as its
overlapping two-character pieces (`研究生命起源` -> `研究 究生 生命 命起 起源` plus the last
character alone), the way Lucene's CJKAnalyzer indexes it, before the engine sees it.

Why the index holds bigrams and not a dictionary segmenter's words, nor FTS5's trigrams:
- trigram cannot match a query shorter than three characters, and most Chinese words are two
  (`退款`, `三省`): such a query finds nothing;
- a segmenter cuts the same characters differently in different contexts (`雾松镇举行` ->
  `雾/松镇/举行`, `雾松镇` alone -> `雾松镇`), so a word of the query can miss the passage
  that contains it.
Every two-character word is one bigram, found wherever it occurs; a longer word is all of its
bigrams (BM25 ranks the passage holding all of them in a row first); a one-character query is
a prefix search over the bigrams (every character starts one, the run's last one too).

A query is a question, though (`青岚茶会在哪里举行`): its bigrams across the question words
(`会在 在哪 哪里 里举`) match nothing, or every passage that also asks something. So a query's
CJK runs are cut into words by a segmenter (rjieba, the Rust port of jieba; optional: without
it the whole run is used), the question words and particles (`ZH_STOPWORDS`) are taken out,
and what is left gives its bigrams. Measured in bench/README.md ("Knowledge bases").

English and other space-separated text is left as words, lowercased; the engine stems it
(FTS5's porter tokenizer, PostgreSQL's `english` configuration).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from loguru import logger

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
# The same for Chinese, as rjieba cuts them: question words, particles, pronouns, copulas and
# auxiliaries. They occur in most passages, so they rank nothing; left in, their bigrams
# (`哪里`, `什么`) match passages that merely ask something too.
ZH_STOPWORDS = frozenset(
    """的 了 吗 呢 吧 啊 呀 嘛 么 呗 哦 是 在 有 和 与 及 或 也 都 就 还 又 要 会 能 可 可以 该
    应该 需要 得 地 着 过 把 被 让 给 对 从 到 向 以 为 于 之 其 而 这 那 这个 那个 这些 那些 这样
    那样 这里 那里 我 你 您 他 她 它 我们 你们 他们 她们 咱们 大家 自己 什么 啥 怎么 怎样 怎么样
    怎么办 如何 为什么 为啥 为何 哪 哪里 哪儿 哪个 哪些 哪位 谁 几 多少 多久 几点 几天 几次 几个
    何时 什么时候 时候 是否 是不是 有没有 能不能 可不可以 要不要 会不会 请问 请 一下 想 想要
    告诉 问 去 来 上 下 里 中 一 个 些 多 最""".split()
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
    """(term, is a prefix) of a user's or the model's query, deduplicated, question words and
    particles out (English stopwords, `ZH_STOPWORDS`); a query of nothing else keeps them.
    A CJK run is cut into words first (`cjk_query_parts`), then each part gives its bigrams
    (one character: that character as a prefix, so `借` still finds `借书证`)."""
    return _terms(query, drop_stop=True) or _terms(query, drop_stop=False)


def _terms(query: str, *, drop_stop: bool) -> list[tuple[str, bool]]:
    terms: list[tuple[str, bool]] = []
    seen: set[str] = set()
    for m in _PIECE.finditer(query):
        piece = m.group(0)
        found: list[tuple[str, bool]] = []
        if _CJK_CHAR.match(piece):
            for part in cjk_query_parts(piece) if drop_stop else [piece]:
                if len(part) > 1:
                    found += [(b, False) for b in cjk_pieces(part)[:-1]]
                else:
                    found.append((part, True))
        else:
            word = piece.lower()
            found = [] if (drop_stop and word in STOPWORDS) else [(word, False)]
        for term, prefix in found:
            if term not in seen:
                seen.add(term)
                terms.append((term, prefix))
    return terms


def cjk_query_parts(run: str) -> list[str]:
    """A CJK run of a query without its question words and particles: cut into words
    (rjieba), the words in `ZH_STOPWORDS` taken out, the words left side by side joined again
    (`青岚茶会在哪里举行` -> `青岚茶会`, `举行`). Joined, because the index holds bigrams, not
    words: a name the segmenter cuts oddly (`雾/松镇`) still gives the bigrams it is indexed
    by. Without rjieba installed, the run as it is (every bigram, as before)."""
    cut = _segmenter()
    if cut is None:
        return [run]
    parts: list[str] = []
    current = ""
    for word in cut(run):
        if word in ZH_STOPWORDS:
            if current:
                parts.append(current)
            current = ""
        else:
            current += word
    if current:
        parts.append(current)
    return parts


_cut: Callable[[str], list[str]] | None = None
_looked = False


def _segmenter() -> Callable[[str], list[str]] | None:
    """rjieba's `cut`, imported at the first CJK query (0.2 s and ~34 MB for its dictionary,
    which a bot without Chinese questions never pays); None when it is not installed."""
    global _cut, _looked
    if not _looked:
        _looked = True
        try:
            import rjieba
        except ImportError:
            logger.warning(
                "knowledge: rjieba is not installed, so Chinese questions are searched with "
                'their question words: pip install "chatfn[knowledge]"'
            )
        else:
            _cut = rjieba.cut
    return _cut


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
