"""Ingestion: files -> rendered pages -> page vectors -> the store, incrementally and safely.

The identity rules that make runs repeatable:

- a document's id is the first 32 hex digits of its file's SHA-256, so an unchanged file is recognised
  without rendering or embedding it;
- a point's id is derived from (document, page, embedding key), so writing a page again overwrites it:
  a run killed half-way and run again ends with exactly the points of a clean run;
- every point carries ``pages_indexed``; a document is complete when the store holds that many points for
  it, so a document interrupted between two write batches is redone by the next run;
- a document's pages are written only after all of them were embedded, and the points of the file's
  previous version are removed only after that: a search never finds the document missing.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from .config import Settings
from .embed import Embedder
from .errors import InputError
from .pagestore import PageStore, StoredPage
from .payloads import EmbeddingInfo, IngestFailure, IngestReport, PagePayload
from .render import PageFailure, Renderer, RenderError, detect_kind
from .store import Filter, Point, StoreError, StoreUnavailableError, VectorStore, open_store, point_id

__all__ = [
    "DOCUMENT_SUFFIXES",
    "Indexer",
    "delete_document",
    "delete_points",
    "discover",
    "embedding_info",
    "open_indexer",
    "open_settings_store",
    "parse_tags",
]

log = logging.getLogger("docvec")

#: Files found in folders are considered only with these suffixes; named files are always tried, and
#: their kind is decided by content.
DOCUMENT_SUFFIXES = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp", ".gif"})

ProgressFn = Callable[[str, int, int], None]  # (path, pages done, page count)


def parse_tags(items: Iterable[str]) -> tuple[str, ...]:
    """Validate ``key=value`` tags (as given to ``--tag``)."""
    out = []
    for t in items:
        key, sep, value = t.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(f"tag {t!r} is not of the form key=value")
        out.append(f"{key.strip()}={value.strip()}")
    return tuple(sorted(set(out)))


def discover(
    paths: Sequence[str | Path], *, recursive: bool = True
) -> tuple[list[Path], list[IngestFailure]]:
    """The files to ingest: named files, folders (recursively) and glob patterns, each once, sorted.

    A name that matches nothing is a failure record, not an exception: the rest of the run goes on.
    """
    found: dict[Path, None] = {}
    failures: list[IngestFailure] = []
    for raw in paths:
        text = str(raw)
        matches = (
            [Path(m) for m in sorted(glob.glob(text, recursive=True))]
            if glob.has_magic(text)
            else [Path(text)]
        )
        if not matches or not matches[0].exists():
            failures.append(IngestFailure(path=text, reason="no such file or folder"))
            continue
        for m in matches:
            if m.is_dir():
                walker = m.rglob("*") if recursive else m.glob("*")
                for f in sorted(walker):
                    if f.is_file() and f.suffix.lower() in DOCUMENT_SUFFIXES and not f.name.startswith("."):
                        found[f.resolve()] = None
            elif m.is_file():
                found[m.resolve()] = None
    return sorted(found), failures


def embedding_info(embedder: Embedder) -> EmbeddingInfo:
    """What identifies the vectors ``embedder`` makes (model files and settings)."""
    s = embedder.settings
    fields = {
        "profile": embedder.profile.name,
        "model": embedder.files.language_model.name,
        "mmproj": embedder.files.mmproj.name,
        "dim": embedder.dim,
        "min_pixels": s.min_pixels,
        "max_pixels": s.max_pixels,
    }
    key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    return EmbeddingInfo(**fields, key=key)  # type: ignore[arg-type]


@dataclass
class _DocState:
    complete: bool
    source: str | None


class Indexer:
    """Ingests documents into one collection of a store. One indexer per process and store."""

    def __init__(
        self,
        embedder: Embedder,
        store: VectorStore,
        pages: PageStore,
        renderer: Renderer,
        *,
        collection: str = "docvec",
    ) -> None:
        self.embedder = embedder
        self.store = store
        self.pages = pages
        self.renderer = renderer
        self.collection = collection
        self.info = embedding_info(embedder)
        store.ensure_collection(collection, embedder.dim)

    # -- runs ---------------------------------------------------------------------------------------

    def ingest(
        self,
        paths: Sequence[str | Path],
        *,
        recursive: bool = True,
        prune: bool = False,
        tags: Sequence[str] = (),
        progress: ProgressFn | None = None,
    ) -> IngestReport:
        """Index every document under ``paths``; skip unchanged ones; with ``prune``, drop vanished files.

        Per-document and per-page problems become failure records and the run goes on; a store that
        cannot be reached ends the run with :class:`StoreUnavailableError` (what was written stays).
        """
        report = IngestReport()
        files, failures = discover(paths, recursive=recursive)
        report.failures.extend(failures)
        report.documents_failed += len(failures)
        tag_list = list(parse_tags(tags))
        for path in files:
            self.ingest_file(path, report, tags=tag_list, progress=progress)
        if prune:
            report.documents_removed += self.prune()
        self.commit()
        return report

    def commit(self) -> None:
        """End a run of writes: bring the collection's search index up to date, and make it all durable."""
        self.store.optimize(self.collection)
        self.store.flush()

    def ingest_file(
        self, path: Path, report: IngestReport, *, tags: list[str], progress: ProgressFn | None = None
    ) -> None:
        """Index one file into ``report``'s counts (see :meth:`ingest`)."""
        source = str(path)
        try:
            kind = detect_kind(path)
            if kind is None:
                raise RenderError(path, "not a document (neither a PDF nor an image)")
            sha = _sha256(path)
            doc_id = sha[:32]
            state = self._state(doc_id)
            if state.complete:
                if state.source != source and state.source and not Path(state.source).exists():
                    self._move(doc_id, state.source, source)  # a moved or renamed file: no re-embedding
                elif state.source != source:
                    log.info("%s: same content as %s, already indexed", source, state.source)
                report.documents_skipped += 1
                report.pages_skipped += self.store.count(self.collection, Filter(doc_ids=(doc_id,)))
                return
            info = self.renderer.open(path)
            written = self._index(path, doc_id, sha, info.kind, info.page_count, tags, report, progress)
        except (RenderError, InputError) as e:
            report.documents_failed += 1
            report.failures.append(IngestFailure(path=source, reason=getattr(e, "reason", str(e))))
            return
        except StoreUnavailableError:
            raise
        except StoreError as e:
            report.documents_failed += 1
            report.failures.append(IngestFailure(path=source, reason=f"store: {e}"))
            return
        if written:
            log.info("indexed %s (%d pages)", source, written)
            report.documents_indexed += 1
            report.pages_indexed += written
            report.documents_removed += self._remove_old_versions(source, doc_id)

    def delete(self, target: str) -> int:
        """Remove a document by id, or every document read from a path; returns the points removed."""
        return delete_document(self.store, self.collection, target)

    def prune(self) -> int:
        """Remove the documents whose source file no longer exists; returns how many."""
        gone: dict[str, set[str]] = {}
        for _, payload in self.store.scroll(self.collection):
            src = str(payload.get("source", ""))
            if src and not Path(src).exists():
                gone.setdefault(src, set()).add(str(payload.get("doc_id")))
        for src in gone:
            log.info("pruning %s (file gone)", src)
            self.store.delete_where(self.collection, Filter(sources=(src,)))
        return sum(len(d) for d in gone.values())

    # -- one document -------------------------------------------------------------------------------

    def _index(
        self,
        path: Path,
        doc_id: str,
        sha: str,
        kind: str,
        page_count: int,
        tags: list[str],
        report: IngestReport,
        progress: ProgressFn | None,
    ) -> int:
        # only what the payloads need: the page images themselves are dropped as soon as they are stored
        rendered: list[tuple[int, tuple[int, int], np.ndarray, StoredPage]] = []
        failed: list[IngestFailure] = []
        for done, item in enumerate(self.renderer.pages(path), start=1):
            if isinstance(item, PageFailure):
                failed.append(IngestFailure(path=str(path), page=item.number, reason=item.reason))
            else:
                try:
                    vec = self.embedder.embed_images([item.image])[0]
                except InputError as e:
                    failed.append(IngestFailure(path=str(path), page=item.number, reason=e.reason))
                else:
                    rendered.append((item.number, item.image.size, vec, self.pages.put(item.image)))
            if progress:
                progress(str(path), done, page_count)
        report.pages_failed += len(failed)
        report.failures.extend(failed)
        if not rendered:
            raise RenderError(path, "no page could be rendered")
        now = datetime.now(UTC)
        points = [
            Point(
                id=point_id(doc_id, number, self.info.key),
                vector=vec,
                payload=PagePayload(
                    doc_id=doc_id,
                    source=str(path),
                    page=number,
                    page_count=page_count,
                    pages_indexed=len(rendered),
                    content_sha256=sha,
                    kind=kind,  # type: ignore[arg-type]
                    width=size[0],
                    height=size[1],
                    image=stored.image,
                    thumbnail=stored.thumbnail,
                    embedding=self.info,
                    ingested_at=now,
                    tags=tags,
                ).model_dump(mode="json"),
            )
            for number, size, vec, stored in rendered
        ]
        self.store.upsert(self.collection, points)
        return len(points)

    def _state(self, doc_id: str) -> _DocState:
        """Whether the store holds all of a document's pages for this embedding key."""
        flt = Filter(doc_ids=(doc_id,))
        first = next(iter(self.store.scroll(self.collection, flt, batch=1)), None)
        if first is None:
            return _DocState(complete=False, source=None)
        payload = first[1]
        if payload.get("embedding", {}).get("key") != self.info.key:
            return _DocState(complete=False, source=payload.get("source"))
        n = self.store.count(self.collection, flt)
        return _DocState(complete=n == payload.get("pages_indexed"), source=payload.get("source"))

    def _move(self, doc_id: str, old: str, new: str) -> None:
        log.info("%s moved to %s: updating its pages", old, new)
        moved = [
            Point(id=p.id, vector=p.vector, payload={**p.payload, "source": new})
            for p in self.store.scroll(self.collection, Filter(doc_ids=(doc_id,)), with_vectors=True)
        ]
        self.store.upsert(self.collection, moved)

    def _remove_old_versions(self, source: str, doc_id: str) -> int:
        """After a file's new version is written: delete points of its old versions and old settings."""
        stale: dict[str, str] = {}
        for pid, payload in self.store.scroll(self.collection, Filter(sources=(source,))):
            if payload.get("doc_id") != doc_id or payload.get("embedding", {}).get("key") != self.info.key:
                stale[pid] = str(payload.get("doc_id"))
        if stale:
            self.store.delete(self.collection, list(stale))
        return len(set(stale.values()) - {doc_id})


def delete_points(store: VectorStore, collection: str, flt: Filter) -> int:
    """Remove the points matching ``flt`` and make it durable; returns how many there were."""
    if collection not in store.collections():
        return 0
    n = store.count(collection, flt)
    if n:
        store.delete_where(collection, flt)
        store.flush()
    return n


def delete_document(store: VectorStore, collection: str, target: str) -> int:
    """Remove a document by id, or every document read from the file ``target``; returns points removed.

    For people typing either at a prompt: an existing file or anything with a path separator is a path.
    """
    p = Path(target)
    by_path = p.exists() or os.sep in target
    flt = Filter(sources=(str(p.resolve()),)) if by_path else Filter(doc_ids=(target,))
    return delete_points(store, collection, flt)


def open_settings_store(settings: Settings) -> VectorStore:
    """The store settings ask for: a Qdrant server when ``qdrant_url`` is set, else the embedded one."""
    return open_store(
        path=settings.data_dir / "qdrant", url=settings.qdrant_url, api_key=settings.qdrant_api_key
    )


@contextmanager
def open_indexer(settings: Settings, *, embedder: Embedder | None = None) -> Iterator[Indexer]:
    """An :class:`Indexer` wired from settings: model, store (embedded or server), page store, renderer.

    Everything it opened is closed on exit; an ``embedder`` passed in is left open for its owner.
    """
    with ExitStack() as stack:
        if embedder is None:
            embedder = stack.enter_context(Embedder.open(settings.model, settings.embed))
        store = stack.enter_context(open_settings_store(settings))
        renderer = stack.enter_context(
            Renderer(
                workers=settings.render.workers,
                target_pixels=settings.embed.max_pixels,
                timeout_s=settings.render.timeout_s,
            )
        )
        yield Indexer(
            embedder, store, PageStore(settings.data_dir / "pages"), renderer, collection=settings.collection
        )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as e:
        raise RenderError(path, f"cannot read the file: {e.strerror or e}") from None
    return h.hexdigest()
