"""Web search through a search-grounded chat model: Perplexity by default, any
OpenAI-compatible search model (base_url/model in config) otherwise.

Why the raw JSON: Perplexity puts its sources next to `choices` (`citations`, a list of URLs,
and `search_results`, with titles), and OpenAI's search models put them in
`message.annotations`. The typed SDK objects would hide the first, so the request goes through
the SDK's `post(..., cast_to=object)` and we read the dict. Reasoning models (sonar-reasoning)
prefix the answer with a `<think>` block, which users must never see.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from function_calls import translate
from function_calls.builtins.web_search.settings import WebSearchSettings

if TYPE_CHECKING:  # the SDK is imported when a search client is made: 30 MB, start-up time
    import openai
    from openai import AsyncOpenAI

SYSTEM_PROMPT = (
    "You answer with facts found on the web. Be concise (at most a few short paragraphs), "
    "answer in the language of the question, mark claims with [n] citations, and say so when "
    "the sources disagree or say nothing. Today is {today}."
)
MAX_SOURCES = 8
_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"^\s*<think>.*", re.DOTALL | re.IGNORECASE)


class SearchError(Exception):
    """The search service failed. `key` (under `web_search.err.`) and `fmt` give the short
    text that says what to check, in any language (`text(language)`); str() is English, for
    the log."""

    def __init__(self, key: str, **fmt: object) -> None:
        self.key = f"web_search.err.{key}"
        self.fmt = fmt
        super().__init__(translate("en", self.key, **fmt))

    def text(self, language: str) -> str:
        return translate(language, self.key, **self.fmt)


@dataclass(frozen=True, slots=True)
class Source:
    url: str
    title: str = ""

    @property
    def label(self) -> str:
        return self.title or urlsplit(self.url).hostname or self.url


@dataclass(slots=True)
class SearchAnswer:
    text: str
    sources: list[Source] = field(default_factory=list)
    model: str = ""
    # The tokens the service reported (`usage`), counted like any model request's.
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def render(self, max_sources: int = MAX_SOURCES) -> str:
        """The answer with its sources as numbered links (matching the [n] markers)."""
        if not self.sources:
            return self.text
        lines = [self.text, "", "Sources:"]
        for i, src in enumerate(self.sources[:max_sources], 1):
            lines.append(f"[{i}] {src.label} — {src.url}" if src.title else f"[{i}] {src.url}")
        return "\n".join(lines)


def strip_think(text: str) -> str:
    """Remove `<think>...</think>` blocks, and an unclosed one (a cut-off answer)."""
    text = _THINK.sub("", text)
    return _OPEN_THINK.sub("", text).strip()


def sources_of(data: dict[str, Any]) -> list[Source]:
    """Sources in citation order, from Perplexity's `citations`/`search_results` or OpenAI's
    `url_citation` annotations; duplicates dropped."""
    titles: dict[str, str] = {}
    ordered: list[str] = []
    for item in data.get("search_results") or ():
        if isinstance(item, dict) and item.get("url"):
            titles.setdefault(item["url"], str(item.get("title") or ""))
            ordered.append(item["url"])
    citations = [c for c in data.get("citations") or () if isinstance(c, str)]
    if citations:
        ordered = citations  # the [n] markers count these
    choices = data.get("choices") or [{}]
    message = (choices[0] or {}).get("message") or {}
    for ann in message.get("annotations") or ():
        cite = ann.get("url_citation") if isinstance(ann, dict) else None
        if isinstance(cite, dict) and cite.get("url"):
            titles.setdefault(cite["url"], str(cite.get("title") or ""))
            ordered.append(cite["url"])
    seen: set[str] = set()
    out = []
    for url in ordered:
        if url not in seen:
            seen.add(url)
            out.append(Source(url=url, title=titles.get(url, "")))
    return out


def parse_answer(data: Any) -> SearchAnswer:
    if not isinstance(data, dict) or not data.get("choices"):
        raise SearchError("no_answer", data=repr(str(data)[:120]))
    message = (data["choices"][0] or {}).get("message") or {}
    text = strip_think(str(message.get("content") or ""))
    if not text:
        raise SearchError("empty")
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    return SearchAnswer(
        text=text,
        sources=sources_of(data),
        model=str(data.get("model") or ""),
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _describe(exc: openai.OpenAIError) -> SearchError:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return SearchError("timeout")
    if isinstance(exc, openai.APIConnectionError):
        return SearchError("unreachable")
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code in (401, 403):
            return SearchError("auth", status=exc.status_code)
        if exc.status_code == 429:
            return SearchError("rate_limited")
        return SearchError("status", status=exc.status_code)
    return SearchError("failed", kind=type(exc).__name__)


class WebSearchClient:
    """One per bot: an AsyncOpenAI client pointed at the search endpoint."""

    def __init__(self, cfg: WebSearchSettings, *, client: AsyncOpenAI | None = None) -> None:
        if cfg.api_key is None and client is None:
            raise SearchError("no_key")
        from openai import AsyncOpenAI

        self.cfg = cfg
        self._owns_client = client is None
        self._client = client or AsyncOpenAI(
            api_key=cfg.api_key.get_secret_value() if cfg.api_key else "",
            base_url=cfg.base_url,
            timeout=cfg.timeout,
            max_retries=1,
        )

    async def search(self, query: str) -> SearchAnswer:
        today = datetime.now().astimezone().strftime("%Y-%m-%d")
        body = {
            "model": self.cfg.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT.format(today=today)},
                {"role": "user", "content": query},
            ],
        }
        import openai

        try:
            data = await self._client.post("/chat/completions", body=body, cast_to=object)
        except openai.OpenAIError as exc:
            raise _describe(exc) from exc
        return parse_answer(data)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.close()
