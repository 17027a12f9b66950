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
  left of the file's other versions (a run killed between the two steps left them);
- pages go to the model in groups (``embed.vision_batch``) that may span documents, and are rendered
  ahead in a thread meanwhile; each document still keeps every rule above on its own, a stop writes what
  every document begun has embedded, and a document whose content one still being written has waits for
  it, and is then skipped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
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
from .._render._renderer import PageFailure, RenderedPage
from .._store import VERSION_RE, Filter, Point, StoredPage, point_id
from .._text._terms import SparseVector, document_vector
from ._feed import Ended, Failed, Feed
from ._parts import Parts
from ._provenance import check_same_vectors, embedding_info, recorded_info
from ._sources import SourceDocument, discover, identify

__all__ = [
    "IngestProgress",
    "Ingestor",
    "Interrupted",
    "Job",
    "PageFn",
    "PagesFn",
    "ProgressFn",
    "kept_text",
    "require_head",
]

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


PagesFn = Callable[
    [int], Generator[RenderedPage | PageFailure, None, None]
]  # a document's pages from a page number on


@dataclasses.dataclass(frozen=True)
class Job:
    """A document for :meth:`Ingestor.ingest_all`: a file (identified then) or a document identified
    already, the tags to give it, a per-page progress callback, and, for a document whose page images
    exist (a reindex), where its pages come from instead of the renderer (``pages(first)``: its pages from
    page ``first`` on, with ``document.page_count`` set) and its first indexing time (default: now)."""

    source: Path | SourceDocument
    tags: Sequence[str] = ()
    progress: PageFn | None = None
    pages: PagesFn | None = None
    ingested_at: datetime | None = None


class Interrupted(Exception):
    """Raised by a progress callback to stop a run between two pages, on purpose: a client cancelled its
    job (``cancelled``), or the server is stopping. Not an error of the documents: the ingest writes the
    pages it has embedded before it lets this through, and a document left part-written resumes after them
    when it is indexed again."""

    def __init__(self, *, cancelled: bool) -> None:
        self.cancelled = cancelled
        super().__init__("cancelled" if cancelled else "stopped: the server is stopping")


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
    """Ingests documents into one version of a collection (see :mod:`docvec._store`), which must exist.
    One run at a time: its renderer renders one document at a time and its model embeds one group at a
    time, so callers that share one serialise their calls.

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
        done = 0

        def on_page(path: Path, page: int, count: int) -> None:
            # where the document stands, with what the documents finished so far came to
            assert progress is not None
            progress(IngestProgress(len(files), done, str(path), page, count, report))

        jobs = (
            Job(path, tags=tags, progress=functools.partial(on_page, path) if progress else None)
            for path in files
        )
        try:
            for _, result in self.ingest_all(jobs):
                report += result
                done += 1
                if progress is not None:
                    progress(IngestProgress(len(files), done, None, 0, 0, report))
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

    def ingest(
        self,
        document: SourceDocument,
        *,
        tags: Sequence[str] = (),
        progress: PageFn | None = None,
        pages: PagesFn | None = None,
        ingested_at: datetime | None = None,
    ) -> IngestReport:
        """Index an identified document, or skip it when the store holds all of it already (one
        :class:`Job`'s :meth:`ingest_all`)."""
        job = Job(document, tags=tags, progress=progress, pages=pages, ingested_at=ingested_at)
        (report,) = [report for _, report in self.ingest_all([job])]
        return report

    def ingest_all(self, jobs: Iterable[Job]) -> Iterator[tuple[Job, IngestReport]]:
        """Index the documents of ``jobs``, each as :class:`Job` says, and give each job's report as its
        document ends (indexed, skipped or failed), in the jobs' order.

        Pages go to the model in groups of the embedder's ``vision_batch`` (one vision-encoder pass, and
        the pages' sequences decoded together), across documents: a folder of one-page scans groups as a
        long document does. Meanwhile a thread renders the next pages (:class:`~._feed.Feed`), up to two
        groups ahead, so that neither the renderer nor the model waits on the other. Each document keeps
        its own rules (module docstring): its batches, its completion mark, its failures; a document of
        the same content as one still being written waits for it, and is skipped then. The renderer is
        the feed's while this runs."""
        size = self.embedder.settings.vision_batch
        ahead = 2 * size  # pages the feed may hold, and documents planned and not ended yet
        todo = iter(jobs)
        waiting: deque[_Writing | _Ended] = deque()  # in the jobs' order, until their reports are given
        group: list[tuple[_Writing, _Item]] = []
        held: _Writing | _Ended | None = None  # the next job, until what it waits for has ended
        more = True
        feed: Feed[_Writing, _Item] = Feed(ahead=ahead)
        # page images are encoded and written by threads of their own (Pillow and the disk let go of the
        # GIL), beside the feed's rendering and the model: on one thread they would set the pace
        # (benchmarks/bench_ingest.py, the instant model's row)
        writers = ThreadPoolExecutor(max(2, self.renderer.workers), thread_name_prefix="docvec-pages")
        with writers, feed:
            try:
                while True:
                    # plan ahead, so that the feed's thread renders while the model embeds
                    while (more or held is not None) and feed.open < ahead:
                        if held is None:
                            job = next(todo, None)
                            if job is None:
                                more = False
                                break
                            held = self._identified(job)
                        if isinstance(held, _Writing):
                            doc_id = held.document.doc_id
                            if any(
                                isinstance(w, _Writing) and w.report is None and w.document.doc_id == doc_id
                                for w in waiting
                            ):
                                break
                            self._plan(held)
                            if held.report is None:
                                feed.put(held, functools.partial(self._stream, held, writers))
                        waiting.append(held)
                        held = None
                    while waiting and waiting[0].report is not None:
                        done = waiting.popleft()
                        assert done.report is not None
                        yield done.job, done.report
                    if not feed.open:
                        if group:
                            self._flush(group)
                            continue
                        if not more and held is None:
                            assert not waiting, "every document begun has ended"
                            return
                        continue
                    writing, item = feed.get()
                    if writing.report is not None:
                        continue  # it failed meanwhile (a store error): the rest of its stream is dropped
                    if isinstance(item, Failed):
                        group[:] = [(w, i) for w, i in group if w is not writing]
                        with self._failing(writing):
                            raise item.error  # the document's failure, or the run's
                    elif isinstance(item, Ended):
                        writing.ended = True
                        if not writing.queued:
                            self._finish(writing)
                    else:
                        if item.count != writing.document.page_count:  # as the renderer found it
                            writing.document = dataclasses.replace(writing.document, page_count=item.count)
                        group.append((writing, item))
                        writing.queued += 1
                        if sum(i.stored is not None for _, i in group) >= size:
                            self._flush(group)
            except (Interrupted, KeyboardInterrupt, GeneratorExit):
                # stopped on purpose (or by Ctrl-C, or by the caller): what is embedded is kept, so that a
                # resume starts after it
                for w in waiting:
                    if isinstance(w, _Writing) and w.report is None and w.batch:
                        self.store.upsert(self.collection, w.batch)
                        w.batch = []
                raise

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

    def _identified(self, job: Job) -> _Writing | _Ended:
        """A job's document, read from its file when the job names a file (ended when it cannot be)."""
        if isinstance(job.source, SourceDocument):
            return _Writing(job, job.source)
        try:
            return _Writing(job, identify(job.source))
        except RenderError as e:
            return _Ended(job, _failed(job.source, e.reason))

    def _plan(self, writing: _Writing) -> None:
        """Where the store stands with the document: skipped (its report set) when it holds all of it,
        else what is left to write (its pages come from :meth:`_stream`)."""
        document, job = writing.document, writing.job
        with self._failing(writing):
            state = writing.state = self._state(document.doc_id)
            writing.written = state.written
            source = str(document.path)
            before = writing.before = state.tags if state.source is not None else self._tags_at(source)
            tags = list(job.tags)
            if not tags and before is not None:
                # a run that names no tags keeps the document's (or its file's previous version's)
                tags = before
            writing.tags = tags
            if state.complete:
                writing.report = self._skip(document, state, tags)
                return
            if state.resume_after:
                log.info("%s: resuming after page %d", source, state.resume_after)
            writing.now = job.ingested_at or datetime.now(UTC)

    def _stream(self, writing: _Writing, writers: Executor) -> Iterator[_Item]:
        """The document's pages after those written (the job's, or rendered; in the feed's thread), each
        image on its way to the page store (by ``writers``), so that encoding and writing the files
        overlap rendering and the model's work."""
        first = writing.state.resume_after + 1
        document = writing.document
        if writing.job.pages is not None:
            count, pages = document.page_count, writing.job.pages(first)
        else:
            info = self.renderer.open(document.path, document.kind)
            count, pages = info.page_count, self.renderer.pages(info, first=first)
        with contextlib.closing(pages) as each:  # closed with the stream: the renderer settles here
            for page in each:
                stored = (
                    writers.submit(self.pages.put, page.image) if isinstance(page, RenderedPage) else None
                )
                yield _Item(count, page, stored)

    def _flush(self, group: list[tuple[_Writing, _Item]]) -> None:
        """Embed a group's pages, hand each page (or its failure) to its document in page order, and end
        the documents whose last page it held."""
        taken, group[:] = list(group), []
        rendered = [item.page for _, item in taken if isinstance(item.page, RenderedPage)]
        embedded = iter(self._embed_group(rendered))
        for writing, item in taken:
            result = next(embedded) if isinstance(item.page, RenderedPage) else None
            writing.queued -= 1
            if writing.report is None:
                with self._failing(writing):
                    self._take(writing, item, result)
        # after the whole group is handed over: a progress callback that stops the run (Interrupted)
        # loses none of the pages embedded
        for writing, item in taken:
            if writing.report is None and writing.job.progress:
                writing.job.progress(item.page.number, writing.document.page_count)
        for writing in dict.fromkeys(w for w, _ in taken):
            if writing.report is None and writing.ended and not writing.queued:
                self._finish(writing)

    def _take(
        self,
        writing: _Writing,
        item: _Item,
        result: tuple[np.ndarray, np.ndarray | None] | InputError | None,
    ) -> None:
        """One page of a document, in page order: its point in the next batch (written once full), or
        its failure."""
        path, page = writing.document.path, item.page
        if isinstance(page, PageFailure):
            writing.failed.append(IngestFailure(path=str(path), page=page.number, reason=page.reason))
        elif isinstance(result, InputError):
            log.warning("%s: page %d: %s", path, page.number, result.reason)
            writing.failed.append(IngestFailure(path=str(path), page=page.number, reason=result.reason))
        elif result is not None and item.stored is not None:
            vec, tokens = result
            stored = item.stored.result()  # what went wrong writing it is raised here: the document's
            point = self._point(writing.document, page, stored, vec, writing.tags, writing.now, tokens)
            writing.batch.append(point)
            writing.unread += self.text is not None and page.text_from == "unread"
        if len(writing.batch) >= BATCH:
            self.store.upsert(self.collection, writing.batch)
            writing.written += len(writing.batch)
            writing.batch = []

    def _finish(self, writing: _Writing) -> None:
        """A document whose pages are all handled: its last batch written, then every page marked complete
        in one update, then its file's other versions removed (its report set)."""
        with self._failing(writing):
            writing.report = self._finished(writing)

    def _finished(self, writing: _Writing) -> IngestReport:
        document, state, failed = writing.document, writing.state, writing.failed
        path = document.path
        if writing.batch:
            self.store.upsert(self.collection, writing.batch)
            writing.written += len(writing.batch)
            writing.batch = []
        written = writing.written
        if not written:
            if document.page_count == 1 and len(failed) == 1:  # its only page: one failure, the page's
                return IngestReport(documents_failed=1, pages_failed=1, failures=failed)
            return IngestReport(pages_failed=len(failed), failures=failed) + _failed(
                path, "no page could be rendered"
            )
        # one update makes the whole document searchable at once, under its final name, tags and count
        finish = {
            "state": "complete",
            "pages_indexed": written,
            "source": str(path),
            "name": document.name,
            "tags": writing.tags,
            "ingested_at": to_jsonable_python(writing.now),
        }
        self.store.set_payload(self.collection, Filter(doc_ids=(document.doc_id,)), finish)
        report = IngestReport(pages_failed=len(failed), failures=failed, pages_unread=writing.unread)
        if writing.before is not None and sorted(writing.tags) != sorted(writing.before):
            report.documents_retagged += 1
        log.info("indexed %s (%d pages)", path, written - state.written)
        report.documents_indexed += 1
        report.pages_indexed += written - state.written
        report.pages_resumed += state.written  # what the interrupted run before this one wrote
        report.documents_removed += self._remove_old_versions(str(path), document.doc_id)
        return report

    @contextlib.contextmanager
    def _failing(self, writing: _Writing) -> Iterator[None]:
        """A document's own problems fail it (its report says why) and the run goes on; a store that
        cannot be written at all stops the run, with what it wrote kept."""
        try:
            yield
        except (RenderError, InputError) as e:
            writing.fail(e.reason)
        except (StoreUnavailableError, DiskFullError):
            raise  # the next document would fail the same way
        except (StoreError, PageStoreError) as e:
            writing.fail(f"store: {e}")

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

    def _embed_group(
        self, pages: list[RenderedPage]
    ) -> Sequence[tuple[np.ndarray, np.ndarray | None] | InputError]:
        """Each page's vectors (:meth:`_embed`), the pages through the model together; where one of them is
        refused (:class:`InputError`), each page on its own, so that only that one fails."""
        if len(pages) > 1:
            try:
                return self._embed(pages)
            except InputError as e:
                log.debug("a page of a group was refused (%s): embedding one at a time", e.reason)
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
        stored: StoredPage,
        vec: np.ndarray,
        tags: list[str],
        now: datetime,
        tokens: np.ndarray | None = None,
    ) -> Point:
        """A page's point (its image ``stored`` in the page store), marked as being written."""
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


@dataclasses.dataclass(frozen=True)
class _Item:
    """A page as the feed hands it over: rendered, its image being stored, or its failure; with its
    document's page count (as the renderer found it)."""

    count: int
    page: RenderedPage | PageFailure
    stored: Future[StoredPage] | None = None  # where its image is: for a rendered page


@dataclasses.dataclass(eq=False)
class _Writing:
    """One document of :meth:`Ingestor.ingest_all`, from its job to its report: where the store stood
    with it, its pages' points in the batch to write next, its failures, its pages in the group."""

    job: Job
    document: SourceDocument
    state: _DocState = dataclasses.field(default_factory=lambda: _DocState(False, None, []))
    before: list[str] | None = None  # the tags it (or its file's previous version) had, if indexed
    tags: list[str] = dataclasses.field(default_factory=list)
    now: datetime = dataclasses.field(default_factory=lambda: datetime.now(UTC))
    batch: list[Point] = dataclasses.field(default_factory=list)
    failed: list[IngestFailure] = dataclasses.field(default_factory=list)
    written: int = 0  # its pages in the store
    unread: int = 0  # of those, pages OCR is still to read
    queued: int = 0  # its items in the group, not handed over yet
    ended: bool = False  # its stream has ended: every item of it came
    report: IngestReport | None = None  # once it has ended: what it came to

    def fail(self, reason: str) -> None:
        """End it as failed (what it wrote stays, part-written, for a later run to resume)."""
        self.report = _failed(self.document.path, reason)


@dataclasses.dataclass(frozen=True)
class _Ended:
    """A job that ended before it began: its file could not be identified."""

    job: Job
    report: IngestReport
