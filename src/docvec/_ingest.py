"""The ingest stage: files -> rendered pages -> page vectors -> the store, incrementally and safely.

The rules that make runs repeatable:

- a document's id comes from its content (see :mod:`docvec._sources`), so an unchanged file is skipped
  without rendering or embedding it;
- a point's id is derived from (document, page, embedding key), so writing a page again overwrites it:
  a run killed half-way and run again ends with exactly the points of a clean run;
- every point carries ``pages_indexed``; a document is complete when the store holds that many points for
  it, so a document interrupted between two write batches is redone by the next run;
- a document's pages are written only after all of them were embedded, and the points of the file's
  previous version are removed only after that: a search never finds the document missing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ._embed import Embedder
from ._errors import InputError, RenderError, StoreError, StoreUnavailableError
from ._pagestore import PageStore, StoredPage
from ._records import EmbeddingInfo, IngestFailure, IngestReport, PagePayload
from ._render import DocumentInfo, PageFailure, Renderer
from ._sources import SourceDocument, discover, identify
from ._store import Filter, Point, Store, point_id

__all__ = ["Ingestor", "ProgressFn", "embedding_info"]

log = logging.getLogger("docvec")

ProgressFn = Callable[[str, int, int], None]  # (path, pages done, page count)


def embedding_info(embedder: Embedder) -> EmbeddingInfo:
    """What identifies the vectors ``embedder`` makes (model files, vector size, image bounds)."""
    fields = {
        "profile": embedder.profile.name,
        "model": embedder.files.language_model.name,
        "mmproj": embedder.files.mmproj.name,
        "dim": embedder.dim,
        "min_pixels": embedder.bounds.min_pixels,
        "max_pixels": embedder.bounds.max_pixels,
    }
    key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    return EmbeddingInfo(**fields, key=key)  # type: ignore[arg-type]


def _failed(path: object, reason: str) -> IngestReport:
    return IngestReport(documents_failed=1, failures=[IngestFailure(path=str(path), reason=reason)])


class Ingestor:
    """Ingests documents into one collection of a store; one at a time (a renderer renders one document
    at a time), so callers that share one serialise their calls."""

    def __init__(
        self, embedder: Embedder, store: Store, pages: PageStore, renderer: Renderer, *, collection: str
    ) -> None:
        self.embedder = embedder
        self.store = store
        self.pages = pages
        self.renderer = renderer
        self.collection = collection
        self.info = embedding_info(embedder)
        store.ensure_collection(collection, embedder.dim)

    # -- runs ---------------------------------------------------------------------------------------

    def run(
        self,
        paths: Sequence[str | Path],
        *,
        recursive: bool = True,
        prune: bool = False,
        tags: Sequence[str] = (),
        progress: ProgressFn | None = None,
    ) -> IngestReport:
        """Index every document under ``paths``; skip unchanged ones; with ``prune``, drop vanished files.

        ``tags`` are stored ``"key=value"`` strings. Per-document and per-page problems become failure
        records and the run goes on; a store that cannot be reached ends the run with
        :class:`~docvec.StoreUnavailableError` (what was written stays).
        """
        files, failures = discover(paths, recursive=recursive)
        report = IngestReport(documents_failed=len(failures), failures=failures)
        for path in files:
            report += self.ingest_file(path, tags=tags, progress=progress)
        if prune:
            report.documents_removed += self.prune()
        self.commit()
        return report

    def commit(self) -> None:
        """End a run of writes: bring the collection's search index up to date, and make it all durable."""
        self.store.optimize(self.collection)
        self.store.flush()

    def ingest_file(
        self, path: Path, *, tags: Sequence[str] = (), progress: ProgressFn | None = None
    ) -> IngestReport:
        """Index one file (see :meth:`run`); what happened to it, as a report of its own."""
        try:
            document = identify(path)
        except RenderError as e:
            return _failed(path, e.reason)
        return self.ingest(document, tags=tags, progress=progress)

    def ingest(
        self, document: SourceDocument, *, tags: Sequence[str] = (), progress: ProgressFn | None = None
    ) -> IngestReport:
        """Index an identified document, or skip it when the store holds all of it already."""
        source = str(document.path)
        try:
            state = self._state(document.doc_id)
            if state.complete:
                return self._skip(document, state.source)
            info = self.renderer.open(document.path, document.kind)
            document = dataclasses.replace(document, page_count=info.page_count)
            report, written = self._index(document, list(tags), progress)
        except (RenderError, InputError) as e:
            return _failed(source, e.reason)
        except StoreUnavailableError:
            raise
        except StoreError as e:
            return _failed(source, f"store: {e}")
        if written:
            log.info("indexed %s (%d pages)", source, written)
            report.documents_indexed += 1
            report.pages_indexed += written
            report.documents_removed += self._remove_old_versions(source, document.doc_id)
        return report

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

    def _skip(self, document: SourceDocument, indexed_from: str | None) -> IngestReport:
        source = str(document.path)
        if indexed_from != source and indexed_from and not Path(indexed_from).exists():
            self._move(document.doc_id, source)  # a moved or renamed file: no re-embedding
        elif indexed_from != source:
            log.info("%s: same content as %s, already indexed", source, indexed_from)
        pages = self.store.count(self.collection, Filter(doc_ids=(document.doc_id,)))
        return IngestReport(documents_skipped=1, pages_skipped=pages)

    def _index(
        self, document: SourceDocument, tags: list[str], progress: ProgressFn | None
    ) -> tuple[IngestReport, int]:
        """Render and embed every page, then write them all; the report holds the pages that failed (and
        the document, when none could be rendered), the number the pages written."""
        # only what the payloads need: the page images themselves are dropped as soon as they are stored
        rendered: list[tuple[int, tuple[int, int], np.ndarray, StoredPage]] = []
        failed: list[IngestFailure] = []
        path = document.path
        for done, item in enumerate(
            self.renderer.pages(DocumentInfo(path, document.kind, document.page_count)), start=1
        ):
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
                progress(str(path), done, document.page_count)
        report = IngestReport(pages_failed=len(failed), failures=failed)
        if not rendered:
            return report + _failed(path, "no page could be rendered"), 0
        now = datetime.now(UTC)
        points = [
            Point(
                id=point_id(document.doc_id, number, self.info.key),
                vector=vec,
                payload=PagePayload(
                    doc_id=document.doc_id,
                    source=str(path),
                    page=number,
                    page_count=document.page_count,
                    pages_indexed=len(rendered),
                    content_sha256=document.sha256,
                    kind=document.kind,
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
        return report, len(points)

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

    def _move(self, doc_id: str, new: str) -> None:
        log.info("document %s moved to %s: updating its pages", doc_id, new)
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


@dataclasses.dataclass
class _DocState:
    complete: bool
    source: str | None
