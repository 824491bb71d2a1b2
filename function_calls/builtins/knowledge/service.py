"""The knowledge service: keeps each base's index in step with its sources, and searches it.

- At start (in the background: the bot answers at once, a search sees what is indexed so
  far), then every `watch_interval` seconds, each configured file is looked at: an unchanged
  size and mtime costs one `stat`; otherwise its SHA-256 decides whether it is indexed again.
  A file gone from its folder leaves the index. URLs are fetched at start and on `/kb
  reindex`; a failed fetch keeps what was indexed before.
- A document is read and cut into passages in a worker thread, embedded (bases with an
  `embedding_model`) over the network, then written in one storage transaction; its vectors
  follow, and `vectors_ok` marks them done (a document indexed while the embeddings server
  was down is embedded at the next sync).
- Search: BM25 (store.keyword_search); with an embedding model also the nearest vectors,
  both lists fused by reciprocal rank (`rrf`), so neither score scale has to be calibrated.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loguru import logger
from yarl import URL

from function_calls import (
    ConfigError,
    FetchError,
    PluginDatabase,
    PluginHost,
    StorageError,
    fetch,
)
from function_calls.builtins.knowledge import store
from function_calls.builtins.knowledge.chunks import chunk
from function_calls.builtins.knowledge.embeddings import Embedder, EmbeddingError
from function_calls.builtins.knowledge.readers import (
    SUFFIXES,
    Section,
    UnreadableDocument,
    kind_of,
    read,
)
from function_calls.builtins.knowledge.settings import BaseSettings, KnowledgeSettings, is_url
from function_calls.builtins.knowledge.vectors import VectorIndex, choose

RRF_K = 60  # the constant of Cormack et al. (2009): ranks matter, raw scores do not
# Candidates each list contributes to the fusion, per passage returned.
CANDIDATES = 4


def rrf(lists: Sequence[Sequence[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each id scores sum(1 / (k + rank)) over the lists it is in."""
    scores: dict[int, float] = {}
    for ranked in lists:
        for rank, item in enumerate(ranked, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda s: (-s[1], s[0]))


@dataclass(frozen=True, slots=True)
class FileSource:
    path: Path  # absolute
    source: str  # as shown and cited: relative to the config file's folder when inside it
    # The source folder it was found in (resolved); None for a file named in the config.
    folder: Path | None = None


def expand(sources: Sequence[str], base_dir: Path) -> tuple[list[FileSource], list[str]]:
    """The files (folders walked for known suffixes) and URLs of a base's sources. A file in
    a folder that is a link to somewhere outside the folder is skipped, with a log line: the
    folder is what the config exposes to the chats, and a link in it to the bot's own config
    would put its API keys one `/kb search` away. (Links to folders are not walked.)"""
    files: dict[Path, FileSource] = {}
    urls: list[str] = []
    for raw in sources:
        if is_url(raw):
            urls.append(raw)
            continue
        path = Path(raw).expanduser()
        path = path if path.is_absolute() else base_dir / path
        folder = path.resolve() if path.is_dir() else None
        found = (
            sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
            if path.is_dir()
            else [path]
            if path.is_file()
            else []
        )
        if not found and not path.exists():
            logger.warning("knowledge: source {} does not exist (yet)", path)
        for p in found:
            if folder is not None and outside(p, folder):
                logger.warning(
                    "knowledge: {} skipped: it leads to {}, outside the source folder {}",
                    p,
                    p.resolve(),
                    path,
                )
                continue
            try:
                shown = p.resolve().relative_to(base_dir.resolve()).as_posix()
            except ValueError:
                shown = str(p)
            files.setdefault(p, FileSource(p, shown, folder))
    return list(files.values()), urls


def outside(path: Path, folder: Path) -> bool:
    """Whether `path`, every link on the way followed, is not inside `folder` (resolved)."""
    return not path.resolve().is_relative_to(folder)


def read_source(f: FileSource) -> bytes:
    """A file's bytes, read from where it resolves to once that was checked to be inside its
    folder: a link swapped in between the walk and the read is not followed out either."""
    real = f.path.resolve()
    if f.folder is not None and not real.is_relative_to(f.folder):
        raise OSError(f"it now leads to {real}, outside the source folder")
    return real.read_bytes()


@dataclass(frozen=True, slots=True)
class _Hosts:
    """A `FetchAllow` for the URLs in the config: the operator wrote them, so their own host
    is fetched even when it is internal (a wiki on the LAN); a redirect elsewhere is not."""

    allow_hosts: tuple[str, ...]
    allow_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()


def _title(sections: list[Section], fallback: str) -> str:
    for s in sections:
        if s.heading:
            return s.heading.split(" › ")[0]
    first = next((s.text.strip().splitlines()[0] for s in sections if s.text.strip()), "")
    return (first[:80] or fallback).strip()


class KnowledgeService:
    """One per bot: the index of every base, its sync and its search. Its way to the database
    is `db`, the plugin's view of its declared tables (`plugin.database(host)`), as a
    third-party plugin's is: from the host it reads only its settings."""

    def __init__(self, host: PluginHost, cfg: KnowledgeSettings, db: PluginDatabase) -> None:
        self.db = db
        self.cfg = cfg
        self.base_dir = Path(host.settings.base_dir)
        # `bot.fetch` (allow_hosts, allow_networks) when the config has it: what a URL added
        # from a chat may reach although internal.
        self.bot_settings = getattr(host.settings, "bot", None)
        self.embedders: dict[str, Embedder] = {}
        models = getattr(host.settings, "models", None) or {}
        for name, base in cfg.bases.items():
            if base.embedding_model is None:
                continue
            entry = models.get(base.embedding_model)
            where = f"knowledge.bases.{name}.embedding_model"
            if entry is None:
                raise ConfigError(f"{where}: no model named {base.embedding_model!r} under models")
            if entry.provider != "openai":
                raise ConfigError(
                    f"{where}: the model {base.embedding_model!r} has provider {entry.provider}; "
                    "embeddings need an OpenAI-compatible server (provider: openai, base_url)"
                )
            if base.embedding_model not in self.embedders:
                self.embedders[base.embedding_model] = Embedder(base.embedding_model, entry)
        self.vectors: VectorIndex | None = None
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._synced = asyncio.Event()

    # -- life cycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Pick the vector backend, then index in the background (the tables are the plugin's
        declared ones, made when the bot was built)."""
        if self.embedders:
            self.vectors = await self.db.run(choose, self.db, self.cfg.vector_backend)
            logger.info("knowledge: vectors in {}", self.vectors.name)
        self._task = asyncio.create_task(self._run(), name="knowledge-sync")

    async def _run(self) -> None:
        try:
            await self.sync(fetch_urls=True)
        except Exception as exc:  # a bad source must not stop the bot; each is logged
            logger.exception("knowledge: first sync failed: {}", exc)
        finally:
            self._synced.set()
        while self.cfg.watch_interval > 0:
            await asyncio.sleep(self.cfg.watch_interval)
            try:
                await self.sync(fetch_urls=False)
            except Exception as exc:
                logger.exception("knowledge: sync failed: {}", exc)

    async def synced(self) -> None:
        """Wait until the first sync after start is over (tests, the benchmark)."""
        await self._synced.wait()

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        for embedder in self.embedders.values():
            await embedder.aclose()
        vectors_db = getattr(self.vectors, "db", None)
        if vectors_db is not None and vectors_db is not self.db:  # sqlite-vec's own engine
            await asyncio.to_thread(vectors_db.close)

    # -- indexing --------------------------------------------------------------------------------
    async def sync(
        self, *, fetch_urls: bool = False, force: bool = False, bases: Sequence[str] | None = None
    ) -> dict[str, int]:
        """Bring the index in step with the sources; returns counts of what was done."""
        done = {"indexed": 0, "unchanged": 0, "removed": 0, "failed": 0}
        async with self._lock:
            for name, base in self.cfg.bases.items():
                if bases is not None and name not in bases:
                    continue
                await self._sync_base(name, base, done, fetch_urls=fetch_urls, force=force)
            if bases is None:
                await self._drop_removed_bases(done)
        return done

    async def _drop_removed_bases(self, done: dict[str, int]) -> None:
        """A base taken out of the config leaves the index. Its vector table (sqlite-vec,
        pgvector) is no longer among the declared ones, so its vectors stay where they are;
        its `embedding:` mark goes, so a base of that name added again starts them anew."""
        gone: set[str] = set()
        for doc in await self.db.run(store.documents, self.db):
            if doc.base not in self.cfg.bases:
                ids = await self.db.run(store.delete_document, self.db, doc.id)
                if self.vectors is not None:
                    with contextlib.suppress(Exception):  # it may never have had any
                        await self.db.run(self.vectors.remove, doc.base, ids)
                gone.add(doc.base)
                done["removed"] += 1
        for base in gone:
            await self.db.run(store.forget_meta, self.db, f"embedding:{base}")

    async def _prepare_vectors(self, name: str, base: BaseSettings, force: bool) -> bool:
        """Whether every passage of `name` needs embedding again (a new model, or forced)."""
        if base.embedding_model is None or self.vectors is None:
            return False
        key = f"embedding:{name}"
        want = f"{base.embedding_model}:{self.embedders[base.embedding_model].model}"
        have = await self.db.run(store.get_meta, self.db, key)
        if have != want or force:
            await self.db.run(self.vectors.clear, name)
            await self.db.run(store.set_meta, self.db, key, want)
            return True
        return False

    async def _sync_base(
        self, name: str, base: BaseSettings, done: dict[str, int], *, fetch_urls: bool, force: bool
    ) -> None:
        redo_vectors = await self._prepare_vectors(name, base, force)
        files, urls = await asyncio.to_thread(expand, base.sources, self.base_dir)
        docs = {d.source: d for d in await self.db.run(store.documents, self.db, [name])}
        for f in files:
            try:
                stat = await asyncio.to_thread(os.stat, f.path)
                old = docs.get(f.source)
                same_stat = (
                    old is not None and old.size == stat.st_size and old.mtime == stat.st_mtime
                )
                if same_stat and not force and not self._needs_vectors(base, old, redo_vectors):
                    done["unchanged"] += 1
                    continue
                if stat.st_size > self.cfg.max_source_bytes:
                    logger.warning("knowledge: {} is over max_source_bytes, skipped", f.path)
                    done["failed"] += 1
                    continue
                data = await asyncio.to_thread(read_source, f)
                digest = hashlib.sha256(data).hexdigest()
                if (
                    old is not None
                    and old.content_hash == digest
                    and not force
                    and not self._needs_vectors(base, old, redo_vectors)
                ):
                    await self.db.run(store.touch, self.db, old.id, stat.st_size, stat.st_mtime)
                    done["unchanged"] += 1
                    continue
                await self._index(
                    name,
                    base,
                    f.source,
                    "file",
                    data,
                    kind_of(f.source),
                    digest,
                    stat.st_size,
                    stat.st_mtime,
                )
                done["indexed"] += 1
            except (OSError, UnreadableDocument, EmbeddingError, StorageError) as exc:
                # StorageError: another process indexing the same file at the same moment (a
                # cluster's workers at start) wins the unique (base, source) row; the next
                # sync sees its hash and leaves it.
                logger.warning("knowledge: {} not indexed: {}", f.source, exc)
                done["failed"] += 1
        for url in urls:
            old = docs.get(url)
            if not fetch_urls and not force and old is not None:
                if not self._needs_vectors(base, old, redo_vectors):
                    continue
            try:
                await self._index_url(name, base, url, old, force or redo_vectors, done)
            except (FetchError, UnreadableDocument, EmbeddingError, StorageError) as exc:
                logger.warning("knowledge: {} not indexed: {}", url, exc)
                done["failed"] += 1
        wanted = {f.source for f in files} | set(urls)
        for source, doc in docs.items():
            if doc.kind in ("file", "url") and not doc.added_by and source not in wanted:
                await self._remove(doc)
                done["removed"] += 1
            elif doc.kind == "added" or doc.added_by:
                if self._needs_vectors(base, doc, redo_vectors):
                    await self._embed_again(name, base, doc)

    @staticmethod
    def _needs_vectors(base: BaseSettings, doc: store.Document | None, redo: bool) -> bool:
        return doc is not None and base.embedding_model is not None and (redo or not doc.vectors_ok)

    async def _fetch(self, url: str, configured: bool) -> tuple[bytes, str]:
        """The whole body of `url` (function_calls.fetch: read to its end, at most
        `max_source_bytes`, within `fetch_timeout`). A URL added from a chat is a user's: an
        internal address is refused unless `bot.fetch` lets it through; a URL in the config
        may be on its own internal host."""
        host = URL(url).host if configured else None
        allow = _Hosts((host,)) if host else getattr(self.bot_settings, "fetch", None)
        got = await fetch(
            url, allow=allow, max_bytes=self.cfg.max_source_bytes, timeout=self.cfg.fetch_timeout
        )
        return got.data, got.content_type

    async def _index_url(
        self,
        name: str,
        base: BaseSettings,
        url: str,
        old: store.Document | None,
        force: bool,
        done: dict[str, int],
        added_by: str = "",
    ) -> int:
        data, content_type = await self._fetch(url, configured=not added_by)
        digest = hashlib.sha256(data).hexdigest()
        if old is not None and old.content_hash == digest and not force:
            done["unchanged"] += 1
            return old.id
        doc_id = await self._index(
            name,
            base,
            url,
            "url",
            data,
            kind_of(url, content_type),
            digest,
            len(data),
            0.0,
            added_by=added_by or (old.added_by if old else ""),
        )
        done["indexed"] += 1
        return doc_id

    async def _index(
        self,
        name: str,
        base: BaseSettings,
        source: str,
        kind: str,
        data: bytes,
        fmt: str,
        digest: str,
        size: int,
        mtime: float,
        *,
        added_by: str = "",
        title: str | None = None,
    ) -> int:
        sections = await asyncio.to_thread(read, data, fmt, self.cfg.max_source_bytes, source)
        passages = await asyncio.to_thread(chunk, sections, base.chunk_tokens)
        pairs = [(p.heading, p.text) for p in passages]
        doc = store.NewDocument(
            base=name,
            source=source,
            kind=kind,
            title=title or _title(sections, source),
            content_hash=digest,
            size=size,
            mtime=mtime,
            added_by=added_by,
        )
        doc_id, ids, old_ids = await self.db.run(store.replace_document, self.db, doc, pairs)
        if self.vectors is not None and base.embedding_model is not None:
            await self.db.run(self.vectors.remove, name, old_ids)
            try:
                await self._write_vectors(name, base, doc_id, list(zip(ids, pairs, strict=True)))
            except EmbeddingError as exc:  # keyword search has it already; vectors next sync
                logger.warning("knowledge: {} indexed without vectors for now: {}", source, exc)
        logger.info("knowledge: {} indexed into {} ({} passages)", source, name, len(ids))
        return doc_id

    async def _write_vectors(
        self, name: str, base: BaseSettings, doc_id: int, items: list[tuple[int, tuple[str, str]]]
    ) -> None:
        assert self.vectors is not None and base.embedding_model is not None
        texts = [f"{h}\n{t}" if h else t for _, (h, t) in items]
        vectors = await self.embedders[base.embedding_model].embed(texts) if texts else []
        if vectors:
            await self.db.run(self.vectors.ensure, name, len(vectors[0]))
            await self.db.run(
                self.vectors.add, name, [(i, v) for (i, _), v in zip(items, vectors, strict=True)]
            )
        await self.db.run(store.mark_vectors, self.db, doc_id)

    async def _embed_again(self, name: str, base: BaseSettings, doc: store.Document) -> None:
        rows = await self.db.run(store.chunk_texts, self.db, doc.id)
        try:
            await self._write_vectors(name, base, doc.id, [(i, (h, t)) for i, h, t in rows])
        except EmbeddingError as exc:
            logger.warning("knowledge: {} not embedded: {}", doc.source, exc)

    async def _remove(self, doc: store.Document) -> None:
        ids = await self.db.run(store.delete_document, self.db, doc.id)
        if (
            self.vectors is not None
            and self.cfg.bases.get(doc.base, BaseSettings()).embedding_model
        ):
            await self.db.run(self.vectors.remove, doc.base, ids)
        logger.info("knowledge: {} removed from {}", doc.source, doc.base)

    # -- what admins do from a chat ------------------------------------------------------------
    async def add(self, base: str, content: str, added_by: str) -> store.Document:
        """Index a URL or a text given in a chat (`/kb add`); returns its document."""
        settings = self.cfg.bases[base]
        done = {"indexed": 0, "unchanged": 0}
        async with self._lock:
            if is_url(content):
                docs = await self.db.run(store.documents, self.db, [base])
                old = next((d for d in docs if d.source == content), None)
                doc_id = await self._index_url(
                    base, settings, content, old, True, done, added_by=added_by
                )
            else:
                data = content.encode()
                digest = hashlib.sha256(data).hexdigest()
                source = f"added:{digest[:10]}"
                doc_id = await self._index(
                    base,
                    settings,
                    source,
                    "added",
                    data,
                    "markdown",
                    digest,
                    len(data),
                    0.0,
                    added_by=added_by,
                )
        docs = await self.db.run(store.documents, self.db, [base])
        return next(d for d in docs if d.id == doc_id)

    async def remove(self, doc: store.Document) -> None:
        async with self._lock:
            await self._remove(doc)

    async def documents(self, bases: Sequence[str]) -> list[store.Document]:
        return await self.db.run(store.documents, self.db, list(bases))

    async def counts(self) -> dict[str, tuple[int, int]]:
        return await self.db.run(store.counts, self.db)

    # -- search ----------------------------------------------------------------------------------
    async def search(
        self, query: str, bases: Sequence[str], k: int | None = None
    ) -> list[store.Passage]:
        """The best `k` passages of `bases` for `query`: BM25, fused with vector neighbours
        for bases that have an embedding model."""
        k = k or self.cfg.top_k
        bases = [b for b in bases if b in self.cfg.bases]
        if not bases or not query.strip():
            return []
        pool = k * CANDIDATES
        # Reads beside the turns' storage thread (the view's run_aside): a search takes 4-6 ms of
        # SQLite, which every other chat's commit would otherwise wait behind.
        keyword = await self.db.run_aside(store.keyword_search, self.db, query, bases, pool)
        with_vectors = [b for b in bases if self.cfg.bases[b].embedding_model]
        if self.vectors is None or not with_vectors:
            return keyword[:k]
        nearest = await self._nearest(query, with_vectors, pool)
        if nearest is None:
            return keyword[:k]
        fused = rrf([[p.chunk_id for p in keyword], [i for i, _ in nearest]])[:k]
        known = {p.chunk_id: p for p in keyword}
        missing = [i for i, _ in fused if i not in known]
        known.update(await self.db.run_aside(store.passages_by_id, self.db, missing))
        out = []
        for chunk_id, score in fused:
            p = known.get(chunk_id)
            if p is not None:
                out.append(
                    store.Passage(p.chunk_id, p.base, p.source, p.kind, p.heading, p.text, score)
                )
        return out

    async def _nearest(
        self, query: str, bases: list[str], pool: int
    ) -> list[tuple[int, float]] | None:
        assert self.vectors is not None
        hits: list[tuple[int, float]] = []
        by_model: dict[str, list[str]] = {}
        for b in bases:
            by_model.setdefault(self.cfg.bases[b].embedding_model or "", []).append(b)
        for model, names in by_model.items():
            try:
                [vector] = await self.embedders[model].embed([query])
            except EmbeddingError as exc:
                logger.warning("knowledge: vector search skipped, keyword only: {}", exc)
                return None
            for b in names:
                try:
                    hits += await self.db.run_aside(self.vectors.nearest, b, vector, pool)
                except Exception as exc:  # no vectors yet (table missing): keyword only
                    logger.debug("knowledge: no vectors for {}: {}", b, exc)
        return sorted(hits, key=lambda h: -h[1])[:pool]


def bases_named(cfg: KnowledgeSettings, names: Sequence[str]) -> list[str]:
    return [n for n in names if n in cfg.bases]
