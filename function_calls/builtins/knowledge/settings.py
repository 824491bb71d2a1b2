"""The `knowledge:` section of config.yaml: named bases, each a list of sources.

    knowledge:
      bases:
        faq:
          sources: ["docs/faq.md", "docs/manual/", "https://example.org/rules.html"]
          chunk_tokens: 400
        handbook: {sources: ["handbook.pdf"], embedding_model: embed}   # a models: entry
    chats:
      - match: {chat_id: "group:123"}
        knowledge: [faq]

Which chats may search which base is said in `chats:` rules (`knowledge: [faq]`), like every
other per-chat setting; a rule naming a base that does not exist stops the bot at start.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from function_calls import ChatKey, ConfigError, Section

#: The bases (names under `knowledge.bases`) a chat may search: `chats[].knowledge`.
KNOWLEDGE: ChatKey[list[str]] = ChatKey(
    "knowledge",
    list[str],
    [],
    description="The knowledge bases (under knowledge.bases) these chats may search.",
)

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")

VectorBackend = Literal["auto", "sqlite-vec", "pgvector", "table"]


class BaseSettings(Section):
    """One knowledge base."""

    # Files (.txt .md .markdown .html .htm .pdf), folders (every such file under them) and
    # http(s) URLs. Relative paths are read from the config file's folder.
    sources: list[str] = Field(default_factory=list)
    # About how many tokens one passage holds (a CJK character counts one, a word ~1.3).
    chunk_tokens: int = Field(default=400, ge=50, le=4000)
    # A `models:` entry whose server answers OpenAI's /v1/embeddings: hybrid search (BM25 and
    # vectors fused). None: BM25 alone, no model and no network.
    embedding_model: str | None = None


class KnowledgeSettings(Section):
    """`knowledge:`: knowledge bases the model searches (files, folders, URLs), indexed in the
    bot's database; a `chats:` rule's `knowledge` names the bases a chat may search."""

    # Off: no base is indexed and the search function is not offered.
    enabled: bool = True
    # The bases, by name (lowercase letters, digits and _).
    bases: dict[str, BaseSettings] = Field(default_factory=dict)
    # Passages one search returns (to the model and to `/kb search`).
    top_k: int = Field(default=5, ge=1, le=20)
    # Where vectors live: "auto" picks sqlite-vec on SQLite, pgvector on PostgreSQL when the
    # extension can be created, else "table" (vectors in a plain table, cosine in Python).
    vector_backend: VectorBackend = "auto"
    # Seconds between two looks at the configured files for changes (size, mtime, then the
    # content hash); 0: only at start and on /kb reindex.
    watch_interval: float = Field(default=60.0, ge=0)
    # Largest file or download indexed, in bytes.
    max_source_bytes: int = Field(default=20_000_000, ge=1000)
    # Seconds to fetch one URL source.
    fetch_timeout: float = Field(default=20.0, gt=0)

    @field_validator("bases")
    @classmethod
    def _names(cls, v: dict[str, BaseSettings]) -> dict[str, BaseSettings]:
        for name in v:
            if not _NAME.match(name):
                raise ValueError(
                    f"base name {name!r}: use lowercase letters, digits and _ (at most 32, "
                    "starting with a letter)"
                )
        return v


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def check_chat_rules(settings: Any, cfg: KnowledgeSettings) -> None:
    """Stop at start on a `chats:` rule naming a base that is not under `knowledge.bases`."""
    errors = []
    for i, rule in enumerate(getattr(settings, "chats", None) or ()):
        for name in rule.get(KNOWLEDGE.name) or ():
            if name not in cfg.bases:
                have = ", ".join(cfg.bases) or "none"
                errors.append(
                    f"chats[{i}].knowledge: no base named {name!r} under knowledge.bases "
                    f"(have: {have})"
                )
    if errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(errors))
