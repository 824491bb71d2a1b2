"""Built-in `knowledge`: answers from the group's own documents, with citations.

Each base under `knowledge.bases` is a set of sources (files, folders, URLs) indexed into the
bot's own database: SQLite FTS5 with BM25 by default (no service, no model download); with an
`embedding_model`, hybrid search (BM25 and vectors fused by reciprocal rank) with the vectors in
sqlite-vec, pgvector or a plain table (vectors.py). A chat searches the bases its `chats:` rule
names (`knowledge: [faq]`); only there does the model see `knowledge_search`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from function_calls import Plugin, PluginHost, Status, Tables
from function_calls.builtins.knowledge.functions import kb, knowledge_search
from function_calls.builtins.knowledge.settings import (
    KNOWLEDGE,
    KnowledgeSettings,
    check_chat_rules,
)
from function_calls.builtins.knowledge.texts import TEXTS

if TYPE_CHECKING:
    from function_calls.builtins.knowledge.service import KnowledgeService

__all__ = ["KnowledgeService", "KnowledgeSettings", "kb", "knowledge_search"]


def __getattr__(name: str) -> Any:
    """`KnowledgeService` on first use: the indexer, its readers and its tables (service.py and
    what it imports) are loaded only by a bot that has bases, not by every bot (peak RSS)."""
    if name == "KnowledgeService":
        from function_calls.builtins.knowledge.service import KnowledgeService

        return KnowledgeService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def tables(cfg: KnowledgeSettings) -> Tables | None:
    """Its tables where it has bases (store.py, imported only then), with each base's vector
    tables (vectors.py); the runtime creates them before the setup below, as every plugin's.
    They are all the service's statements may name: it gets `plugin.database(host)`."""
    if not cfg.bases:
        return None
    from function_calls.builtins.knowledge.store import tables as knowledge_tables
    from function_calls.builtins.knowledge.vectors import declared_tables, pgvector_step

    pgvector = cfg.vector_backend in ("auto", "pgvector") and any(
        base.embedding_model for base in cfg.bases.values()
    )
    return knowledge_tables(declared_tables(cfg), also=pgvector_step if pgvector else None)


plugin = Plugin(
    "knowledge",
    settings=KnowledgeSettings,
    texts=TEXTS,
    chat_keys=[KNOWLEDGE],
    tables=tables,
)


@plugin.status
def status(cfg: KnowledgeSettings) -> Status:
    if not cfg.enabled:
        return Status("off", "knowledge.enabled is false")
    if not cfg.bases:
        return Status("on", "no bases (knowledge.bases)")
    parts = []
    for name, base in cfg.bases.items():
        how = f"hybrid with {base.embedding_model}" if base.embedding_model else "BM25"
        parts.append(f"{name} ({len(base.sources)} sources, {how})")
    return Status("on", ", ".join(parts))


@plugin.on_setup
def create_service(host: PluginHost) -> None:
    """Config mistakes (a rule naming a missing base, an embedding model that is not there)
    stop the bot when it is built, naming the key."""
    cfg = host.section(KnowledgeSettings)
    check_chat_rules(host.settings, cfg)
    if not cfg.bases:
        return  # nothing to index or search: /kb says so (functions.py)
    from function_calls.builtins.knowledge.service import KnowledgeService

    host.provide(KnowledgeService(host, cfg, plugin.database(host)))


@plugin.on_startup
async def start(host: PluginHost) -> None:
    service = _running(host)
    if service is not None:
        await service.start()


@plugin.on_shutdown
async def stop(host: PluginHost) -> None:
    service = _running(host)
    if service is not None:
        await service.shutdown()


def _running(host: PluginHost) -> KnowledgeService | None:
    if not host.section(KnowledgeSettings).bases:
        return None  # no service was made, and its module need not be loaded to say so
    from function_calls.builtins.knowledge.service import KnowledgeService

    return host.service(KnowledgeService)
