"""The ingest stage: files -> rendered pages -> page vectors -> the store, incrementally and safely.

The rules that make runs repeatable:

- a document's id comes from its content (see :mod:`docvec._pipeline._sources`), so an unchanged file is
  skipped without rendering or embedding it;
- a point's id is derived from (document, page, embedding key), so writing a page again overwrites it:
  a run killed half-way and run again ends with exactly the points of a clean run;
- a document's pages are written in batches of :data:`BATCH` as they are embedded, marked ``state:
  writing``, which searches leave out; when the last is written, every page is marked ``complete`` with
  the number written (``pages_indexed``) in one update. A run killed half-way through a long document
  resumes it after the last batch written, so it loses at most one batch of work; a run stopped on
  purpose (its progress callback raises :class:`Interrupted` between two pages) writes the pages it has
  embedded first, and loses none;
- the points of the file's previous version are removed only after its new version is complete, so a
  search never finds the document missing; and any run that finds a complete document removes what is
  left of the file's other versions (a run killed between the two steps left them).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from pydantic_core import to_jsonable_python

from .._errors import (
    DiskFullError,
    InputError,
    ModelError,
    PageStoreError,
    RenderError,
    StoreError,
    StoreUnavailableError,
)
from .._model._embedder import Embedder
from .._model._pooling import pool_tokens
from .._model._registry import pull_with_head
from .._records import IngestFailure, IngestReport, PagePayload, TextIndex
from .._render._renderer import DocumentInfo, PageFailure, RenderedPage
from .._store import VERSION_RE, Filter, Point, point_id
from .._text._terms import SparseVector, document_vector
from ._parts import Parts
from ._provenance import check_same_vectors, embedding_info, recorded_info
from ._sources import SourceDocument, discover, identify

__all__ = ["IngestProgress", "Ingestor", "Interrupted", "PageFn", "ProgressFn", "kept_text", "require_head"]

log = logging.getLogger("docvec")

#: pages written to the store at once while a document is embedded (the most a killed run loses)
BATCH = 32

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


class Interrupted(Exception):
    """Raised by a progress callback to stop a run between two pages, on purpose: a client cancelled its
    job (``cancelled``), or the server is stopping. Not an error of the documents: the ingest writes the
    pages it has embedded before it lets this through, and a document left part-written resumes after them
    when it is indexed again."""

    def __init__(self, *, cancelled: bool) -> None:
        self.cancelled = cancelled
        super().__init__("cancelled" if cancelled else "stopped: the server is stopping")


def _tell(
    progress: ProgressFn, total: int, done: int, path: str, report: IngestReport, page: int, count: int
) -> None:
    progress(IngestProgress(total, done, path, page, count, report))


def _failed(path: object, reason: str) -> IngestReport:
    return IngestReport(documents_failed=1, failures=[IngestFailure(path=str(path), reason=reason)])


def require_head(embedder: Embedder, collection: str) -> None:
    """Refuse to fill multi-vector ``collection`` with a model that has no multi-vector head."""
    if embedder.has_multivector:
        return
    if not embedder.profile.multivector:
        raise ModelError(
            f"collection {collection!r} is multi-vector, and {embedder.profile.name} gives single vectors "
            "only (the model has no multi-vector head): use a single-vector collection with it, or a model "
            f"with a head for this one ({pull_with_head()})"
        )
    folder = embedder.files.language_model.parent
    raise ModelError(
        f"collection {collection!r} is multi-vector, and the model {folder} has no multi-vector "
        "head: `docvec models convert` one from a checkpoint that has it, or get a model with one "
        f"({pull_with_head()})"
    )


class Ingestor:
    """Ingests documents into one version of a collection (see :mod:`docvec._store`), which must exist;
    one document at a time (a renderer renders one document at a time), so callers that share one
    serialise their calls.

    A version whose vectors another model or other settings made is refused at once
    (:class:`~docvec.CollectionMismatchError`): adding to it would mix two kinds of vectors.
    """

    def __init__(
        self,
        parts: Parts,
        *,
        collection: str,
        multivector: bool = False,
        token_pool: int = 1,
        text: TextIndex | None = None,
    ) -> None:
        self.parts = parts
        #: how the version keeps its pages' text (``None``: it keeps none)
        self.text = text
        self.embedder = embedder = parts.embedder
        self.store = store = parts.store
        self.pages = parts.pages
        self.renderer = parts.renderer
        self.collection = collection
        self.info = embedding_info(embedder, multivector=multivector, token_pool=token_pool)
        # messages name the collection users know, not the version (docvec.v1) written to
        m = VERSION_RE.fullmatch(collection)
        shown = collection if m is None else m["name"]
        if self.info.multivector:
            require_head(embedder, shown)
        check_same_vectors(
            recorded_info(store, collection),
            self.info,
            collection=shown,
            where=store.where,
            for_search=False,
        )

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
        found = discover(paths, recursive=recursive)
        files = found.files
        report = IngestReport(
            documents_failed=len(found.failures),
            failures=found.failures,
            ignored=[str(p) for p in found.ignored],
            empty=found.empty,
        )
        try:
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
        except StoreError as e:
            e.partial = report  # what the run did before the store stopped it: written, and kept
            raise
        return report

    def commit(self) -> None:
        """End a run of writes: bring the collection's search index up to date, and make it all durable.

        Without the room to optimize, the collection stays as written (searchable, by a slower scan) and
        the next run with room optimizes it: a warning, not a failure."""
        try:
            self.store.optimize(self.collection)
        except DiskFullError as e:
            log.warning("%s (the collection is not optimized: searches scan it unquantized meanwhile)", e)
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
        self,
        document: SourceDocument,
        *,
        tags: Sequence[str] = (),
        progress: PageFn | None = None,
        pages: Callable[[int], Iterable[RenderedPage | PageFailure]] | None = None,
        ingested_at: datetime | None = None,
    ) -> IngestReport:
        """Index an identified document, or skip it when the store holds all of it already.

        ``pages(first)``, when given, yields the document's pages from page ``first`` on instead of the
        renderer (a reindex reads them from the page store, with the text it found for them:
        ``document.page_count`` must be set then); ``ingested_at`` keeps a document's first indexing time
        (default: now).
        """
        source = str(document.path)
        try:
            state = self._state(document.doc_id)
            before = state.tags if state.source is not None else self._tags_at(source)
            if not tags and before is not None:
                # a run that names no tags keeps the document's (or its file's previous version's)
                tags = before
            if state.complete:
                return self._skip(document, state, list(tags))
            if pages is None:
                info = self.renderer.open(document.path, document.kind)
                document = dataclasses.replace(document, page_count=info.page_count)
                opened = DocumentInfo(document.path, document.kind, document.page_count)
                pages = functools.partial(self._rendered, opened)
            if state.resume_after:
                log.info("%s: resuming after page %d", source, state.resume_after)
            report, written = self._index(
                document, list(tags), progress, state, pages, ingested_at or datetime.now(UTC)
            )
        except (RenderError, InputError) as e:
            return _failed(source, e.reason)
        except (StoreUnavailableError, DiskFullError):
            raise  # the next document would fail the same way: the run stops, with what it wrote kept
        except (StoreError, PageStoreError) as e:
            return _failed(source, f"store: {e}")
        if before is not None and sorted(tags) != sorted(before):
            report.documents_retagged += 1
        if written:
            log.info("indexed %s (%d pages)", source, written)
            report.documents_indexed += 1
            report.pages_indexed += written
            report.pages_resumed += state.written  # what the interrupted run before this one wrote
            report.documents_removed += self._remove_old_versions(source, document.doc_id)
        return report

    def prune(self) -> int:
        """Remove the documents whose source file no longer exists; returns how many."""
        gone: dict[str, set[str]] = {}
        for _, page in self.store.pages(self.collection):
            if page.source and not Path(page.source).exists():
                gone.setdefault(page.source, set()).add(page.doc_id)
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
        retagged = 0
        if state.source != source and state.source and not Path(state.source).exists():
            log.info("%s moved to %s: updating its pages", state.source, source)
            update |= {"source": source, "name": document.name}
        elif state.source != source:
            log.info("%s: same content as %s, already indexed", source, state.source)
            tags = state.tags  # another copy's run does not retag the document
        if tags != state.tags:
            log.info("%s: tags %s -> %s", source, state.tags, tags)
            update["tags"] = tags
            retagged = 1
        if update:
            self.store.set_payload(self.collection, Filter(doc_ids=(document.doc_id,)), update)
        pages = self.store.count(self.collection, Filter(doc_ids=(document.doc_id,)))
        removed = 0
        if self.store.count(self.collection, Filter(sources=(source,))) > pages:
            # the file's previous version is still there: a run was killed after it wrote this one
            removed = self._remove_old_versions(source, document.doc_id)
        return IngestReport(
            documents_skipped=1,
            pages_skipped=pages,
            documents_updated=int(bool(update)),
            documents_retagged=retagged,
            documents_removed=removed,
        )

    def _rendered(self, info: DocumentInfo, first: int) -> Iterable[RenderedPage | PageFailure]:
        return self.renderer.pages(info, first=first)

    def _index(
        self,
        document: SourceDocument,
        tags: list[str],
        progress: PageFn | None,
        state: _DocState,
        pages: Callable[[int], Iterable[RenderedPage | PageFailure]],
        now: datetime,
    ) -> tuple[IngestReport, int]:
        """Embed and write the pages after ``state.resume_after``, batch by batch, then mark the document
        complete; the report holds the pages that failed (or the document, when none could be rendered),
        the number the pages of the document written in all."""
        path = document.path
        batch: list[Point] = []
        failed: list[IngestFailure] = []
        written = state.written
        unread = 0
        # pages are embedded in groups of the embedder's vision_batch (one vision-encoder pass each), the
        # items of a group handled in page order once it is embedded; the renderer's workers render the
        # next pages meanwhile
        group_size = self.embedder.settings.vision_batch
        pending: list[RenderedPage | PageFailure] = []

        def flush() -> None:
            nonlocal batch, written, unread
            rendered = [item for item in pending if isinstance(item, RenderedPage)]
            embedded = iter(self._embed_group(path, rendered))
            for item in pending:
                if isinstance(item, PageFailure):
                    failed.append(IngestFailure(path=str(path), page=item.number, reason=item.reason))
                else:
                    result = next(embedded)
                    if isinstance(result, InputError):
                        log.warning("%s: page %d: %s", path, item.number, result.reason)
                        failed.append(IngestFailure(path=str(path), page=item.number, reason=result.reason))
                    else:
                        vec, tokens = result
                        batch.append(self._point(document, item, vec, tags, now, tokens))
                        unread += self.text is not None and item.text_from == "unread"
                if len(batch) >= BATCH:
                    self.store.upsert(self.collection, batch)
                    written += len(batch)
                    batch = []
            done, pending[:] = list(pending), []
            # after the whole group is in `batch`: a progress callback that stops the run (Interrupted)
            # loses none of the pages embedded
            if progress:
                for item in done:
                    progress(item.number, document.page_count)

        try:
            for item in pages(state.resume_after + 1):
                pending.append(item)
                if sum(isinstance(i, RenderedPage) for i in pending) >= group_size:
                    flush()
            flush()
        except (Interrupted, KeyboardInterrupt):
            # stopped between pages (on purpose) or in the middle of one (Ctrl-C): what is embedded is kept,
            # so that a resume starts after it
            if batch:
                self.store.upsert(self.collection, batch)
            raise
        if batch:
            self.store.upsert(self.collection, batch)
            written += len(batch)
        if not written:
            if document.page_count == 1 and len(failed) == 1:  # its only page: one failure, the page's
                return IngestReport(documents_failed=1, pages_failed=1, failures=failed), 0
            return IngestReport(pages_failed=len(failed), failures=failed) + _failed(
                path, "no page could be rendered"
            ), 0
        # one update makes the whole document searchable at once, under its final name, tags and count
        finish = {
            "state": "complete",
            "pages_indexed": written,
            "source": str(path),
            "name": document.name,
            "tags": tags,
            "ingested_at": to_jsonable_python(now),
        }
        self.store.set_payload(self.collection, Filter(doc_ids=(document.doc_id,)), finish)
        report = IngestReport(pages_failed=len(failed), failures=failed, pages_unread=unread)
        return report, written - state.written

    def _embed_group(
        self, path: Path, pages: list[RenderedPage]
    ) -> Sequence[tuple[np.ndarray, np.ndarray | None] | InputError]:
        """Each page's vectors (:meth:`_embed`), the pages through the vision encoder together; where one
        of them is refused (:class:`InputError`), each page on its own, so that only that one fails."""
        if len(pages) > 1:
            try:
                return self._embed(pages)
            except InputError as e:
                log.debug("%s: a page of the group was refused (%s): embedding one at a time", path, e.reason)
        out: list[tuple[np.ndarray, np.ndarray | None] | InputError] = []
        for page in pages:
            try:
                out.extend(self._embed([page]))
            except InputError as e:
                out.append(e)
        return out

    def _embed(self, pages: list[RenderedPage]) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """Each page's dense vector, and its token vectors (pooled) in a multi-vector collection."""
        images = [page.image for page in pages]
        if not self.info.multivector:
            return [(vec, None) for vec in self.embedder.embed_images(images)]
        dense, tokens = self.embedder.embed_images_multi(images)
        pooling = self.embedder.profile.token_pooling
        return [
            (vec, pool_tokens(t, self.info.token_pool, pooling)) for vec, t in zip(dense, tokens, strict=True)
        ]

    def _point(
        self,
        document: SourceDocument,
        page: RenderedPage,
        vec: np.ndarray,
        tags: list[str],
        now: datetime,
        tokens: np.ndarray | None = None,
    ) -> Point:
        """A page's point, its image in the page store, marked as being written."""
        stored = self.pages.put(page.image)
        text, terms = kept_text(self.text, page.text)
        unread = self.text is not None and page.text_from == "unread"
        payload = PagePayload(
            doc_id=document.doc_id,
            source=str(document.path),
            name=document.name,
            page=page.number,
            page_count=document.page_count,
            pages_indexed=0,  # none is searchable until the document is complete: then, the pages written
            content_sha256=document.sha256,
            kind=document.kind,
            width=page.image.width,
            height=page.image.height,
            image=stored.image,
            thumbnail=stored.thumbnail,
            embedding=self.info,
            ingested_at=now,
            tags=tags,
            state="writing",
            text=text,
            # unread: a version that keeps text knows which pages OCR has still to read
            text_from=page.text_from if text is not None or unread else None,
        )
        return Point(
            id=point_id(document.doc_id, page.number, self.info.key),
            vector=vec,
            payload=payload.model_dump(mode="json"),
            tokens=tokens,
            terms=terms,
        )

    def _state(self, doc_id: str) -> _DocState:
        """Where the store stands with a document for this embedding key: complete, part-written (and up
        to which page), or not there; where it was read from and its tags."""
        flt = Filter(doc_ids=(doc_id,))
        first = self.store.page(self.collection, flt)
        if first is None:
            return _DocState(complete=False, source=None, tags=[])
        source, tags = first.source, sorted(first.tags)
        if first.embedding.key != self.info.key:
            return _DocState(complete=False, source=source, tags=tags)
        if not first.finished:
            numbers = [p.page for _, p in self.store.pages(self.collection, flt, batch=1024)]
            return _DocState(False, source, tags, resume_after=max(numbers), written=len(numbers))
        n = self.store.count(self.collection, flt)
        return _DocState(complete=n == first.pages_indexed, source=source, tags=tags)

    def _tags_at(self, source: str) -> list[str] | None:
        """The tags of what is indexed from ``source`` (a file's previous version), ``None`` if nothing."""
        first = self.store.page(self.collection, Filter(sources=(source,)))
        return None if first is None else sorted(first.tags)

    def _remove_old_versions(self, source: str, doc_id: str) -> int:
        """After a file's new version is written: delete points of its old versions and old settings."""
        stale: dict[str, str] = {}
        for pid, page in self.store.pages(self.collection, Filter(sources=(source,))):
            if page.doc_id != doc_id or page.embedding.key != self.info.key:
                stale[pid] = page.doc_id
        if stale:
            self.store.delete(self.collection, list(stale))
        return len(set(stale.values()) - {doc_id})


def kept_text(index: TextIndex | None, text: str | None) -> tuple[str | None, SparseVector | None]:
    """What a page with ``text`` keeps in a version that keeps text as ``index`` says: the text (cut to
    its bound) and its terms; nothing in a version without text, or for a page without any."""
    if index is None or not text or not text.strip():
        return None, None
    text = text[: index.max_chars]
    return text, document_vector(text, index.analyzer, index.weights)


@dataclasses.dataclass
class _DocState:
    complete: bool
    source: str | None
    tags: list[str]
    resume_after: int = 0  # the last page of a part-written document (its pages are written in order)
    written: int = 0  # its pages written so far
