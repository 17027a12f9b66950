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
import functools
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ._embed import Embedder
from ._errors import InputError, RenderError, StoreError, StoreUnavailableError
from ._pagestore import PageStore, StoredPage
from ._provenance import check_same_vectors, embedding_info, recorded_info
from ._records import IngestFailure, IngestReport, PagePayload
from ._render import DocumentInfo, PageFailure, Renderer
from ._sources import SourceDocument, discover, identify
from ._store import Filter, Point, Store, point_id

__all__ = ["IngestProgress", "Ingestor", "PageFn", "ProgressFn"]

log = logging.getLogger("docvec")

PageFn = Callable[[int, int], None]  # (pages of the current document done, its page count)


@dataclasses.dataclass(frozen=True)
class IngestProgress:
    """Where an ingest run stands, after each page and each document."""

    documents_total: int  # files the run reads
    documents_done: int  # of those, finished (indexed, skipped or failed)
    current: str | None  # the file being read
    page: int  # its pages done
    page_count: int  # its pages (0 until it is opened)
    report: IngestReport  # what the finished documents came to


ProgressFn = Callable[[IngestProgress], None]


def _tell(
    progress: ProgressFn, total: int, done: int, path: str, report: IngestReport, page: int, count: int
) -> None:
    progress(IngestProgress(total, done, path, page, count, report))


def _failed(path: object, reason: str) -> IngestReport:
    return IngestReport(documents_failed=1, failures=[IngestFailure(path=str(path), reason=reason)])


class Ingestor:
    """Ingests documents into one collection of a store; one at a time (a renderer renders one document
    at a time), so callers that share one serialise their calls.

    A collection whose vectors another model or other settings made is refused at once
    (:class:`~docvec.CollectionMismatchError`): adding to it would mix two kinds of vectors.
    """

    def __init__(
        self, embedder: Embedder, store: Store, pages: PageStore, renderer: Renderer, *, collection: str
    ) -> None:
        self.embedder = embedder
        self.store = store
        self.pages = pages
        self.renderer = renderer
        self.collection = collection
        self.info = embedding_info(embedder)
        check_same_vectors(
            recorded_info(store, collection),
            self.info,
            collection=collection,
            where=store.where,
            for_search=False,
        )
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

        ``tags`` are stored ``"key=value"`` strings: a document's tags are those of the last run that read
        it (an unchanged document whose tags differ is updated in place, without re-embedding it).
        Per-document and per-page problems become failure records and the run goes on; a store that
        cannot be reached ends the run with
        :class:`~docvec.StoreUnavailableError` (what was written stays).
        """
        files, failures = discover(paths, recursive=recursive)
        report = IngestReport(documents_failed=len(failures), failures=failures)
        for done, path in enumerate(files):
            on_page = None
            if progress is not None:
                # page by page: the finished documents' report, and where this one stands
                on_page = functools.partial(_tell, progress, len(files), done, str(path), report)
            report += self.ingest_file(path, tags=tags, progress=on_page)
            if progress is not None:
                progress(IngestProgress(len(files), done + 1, None, 0, 0, report))
        if prune:
            report.documents_removed += self.prune()
        self.commit()
        return report

    def commit(self) -> None:
        """End a run of writes: bring the collection's search index up to date, and make it all durable."""
        self.store.optimize(self.collection)
        self.store.flush()

    def ingest_file(
        self, path: Path, *, tags: Sequence[str] = (), progress: PageFn | None = None
    ) -> IngestReport:
        """Index one file (see :meth:`run`); what happened to it, as a report of its own."""
        try:
            document = identify(path)
        except RenderError as e:
            return _failed(path, e.reason)
        return self.ingest(document, tags=tags, progress=progress)

    def ingest(
        self, document: SourceDocument, *, tags: Sequence[str] = (), progress: PageFn | None = None
    ) -> IngestReport:
        """Index an identified document, or skip it when the store holds all of it already."""
        source = str(document.path)
        try:
            state = self._state(document.doc_id)
            if state.complete:
                return self._skip(document, state, list(tags))
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

    def _skip(self, document: SourceDocument, state: _DocState, tags: list[str]) -> IngestReport:
        """An unchanged document: nothing is rendered or embedded; a move or new tags update its pages'
        payloads in place."""
        source = str(document.path)
        update: dict[str, object] = {}
        if state.source != source and state.source and not Path(state.source).exists():
            log.info("%s moved to %s: updating its pages", state.source, source)
            update |= {"source": source, "name": document.name}
        elif state.source != source:
            log.info("%s: same content as %s, already indexed", source, state.source)
            tags = state.tags  # another copy's run does not retag the document
        if tags != state.tags:
            log.info("%s: tags %s -> %s", source, state.tags, tags)
            update["tags"] = tags
        if update:
            self.store.set_payload(self.collection, Filter(doc_ids=(document.doc_id,)), update)
        pages = self.store.count(self.collection, Filter(doc_ids=(document.doc_id,)))
        return IngestReport(documents_skipped=1, pages_skipped=pages, documents_updated=int(bool(update)))

    def _index(
        self, document: SourceDocument, tags: list[str], progress: PageFn | None
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
                progress(done, document.page_count)
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
                    name=document.name,
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
        """Whether the store holds all of a document's pages for this embedding key, where it was read from
        and its tags."""
        flt = Filter(doc_ids=(doc_id,))
        first = next(iter(self.store.scroll(self.collection, flt, batch=1)), None)
        if first is None:
            return _DocState(complete=False, source=None, tags=[])
        payload = first[1]
        source, tags = payload.get("source"), sorted(str(t) for t in payload.get("tags") or ())
        if payload.get("embedding", {}).get("key") != self.info.key:
            return _DocState(complete=False, source=source, tags=tags)
        n = self.store.count(self.collection, flt)
        return _DocState(complete=n == payload.get("pages_indexed"), source=source, tags=tags)

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
    tags: list[str]
