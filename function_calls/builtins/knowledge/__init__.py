"""Built-in `knowledge`: answers from the group's own documents, with citations.

Each base under `knowledge.bases` is a set of sources (files, folders, URLs) indexed into the
bot's own database: SQLite FTS5 with BM25 by default (no service, no model download); with an
`embedding_model`, hybrid search (BM25 and vectors fused by reciprocal rank) with the vectors in
sqlite-vec, pgvector or a plain table (vectors.py). A chat searches the bases its `chats:` rule
names (`knowledge: [faq]`); only there does the model see `knowledge_search`.
"""

from __future__ import annotations

from function_calls import Plugin, PluginHost, Status
from function_calls.builtins.knowledge.functions import kb, knowledge_search
from function_calls.builtins.knowledge.service import KnowledgeService, check_chat_rules
from function_calls.builtins.knowledge.settings import KnowledgeSettings

__all__ = ["KnowledgeService", "KnowledgeSettings", "kb", "knowledge_search"]

plugin = Plugin("knowledge", settings=KnowledgeSettings)


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
    host.provide(KnowledgeService(host, cfg))


@plugin.on_startup
async def start(host: PluginHost) -> None:
    service = host.service(KnowledgeService)
    if service is not None:
        await service.start()


@plugin.on_shutdown
async def stop(host: PluginHost) -> None:
    service = host.service(KnowledgeService)
    if service is not None:
        await service.shutdown()
