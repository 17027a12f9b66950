"""docvec's front door: :class:`Index`, a searchable visual index of documents, with a few verbs.

>>> with Index.open("~/docvec-data") as index:                     # doctest: +SKIP
...     report = index.add(["~/papers"], tags=["team=legal"])
...     for hit in index.search("total amount due", k=5):
...         print(hit.score, hit.source, hit.page)

The CLI, the REST API, the Prefect flows, ``docvec eval`` and the demo all go through it. It opens the
store at once and the model only when a verb needs it, so listing or deleting documents costs no model
load.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Literal, Unpack

from . import _records as records
from ._closing import Closing
from ._config import Settings, settings_for
from ._errors import (
    CollectionNotFoundError,
    ConfigError,
    ConflictError,
    IngestError,
    InputError,
    ModelError,
    NotFoundError,
    RenderError,
    TooLargeError,
)
from ._fileio import MB
from ._live import LiveVersion
from ._model import Embedder, Reranker
from ._pipeline import _documents, _gc, _rerank, _search
from ._pipeline._ingest import Interrupted, PageFn, ProgressFn
from ._pipeline._queue import QueuedUpload, UploadQueue
from ._pipeline._sources import SourceDocument
from ._pipeline._versions import list_versions
from ._render import Renderer
from ._store import VERSION_RE, Filter, PageStore, Store, open_store

__all__ = ["GC_GRACE_S", "UPLOAD_GRACE_S", "Index"]

log = logging.getLogger("docvec")

#: With a Qdrant server, page images written or reused this recently are never collected (a run in
#: another process may be about to store the page that shows one).
GC_GRACE_S = 24 * 3600.0
#: Leftovers of uploads (a temporary file of one being received, an upload kept and never queued) this
#: recent are never collected: a request may be receiving it, or a caller about to index it.
UPLOAD_GRACE_S = 3600.0


class Index(Closing):
    """The pages of a collection of documents, searchable by text: one object with a few verbs.

    ``add`` indexes files and folders, ``search`` answers a query with the best pages, ``documents`` and
    ``pages`` list what is indexed, ``delete`` removes a document. Open it with :meth:`open`; close it
    (or use it as a context manager) to release the store, the model and the render workers.

    Safe to share between threads: searches run side by side; writes (``add``, ``add_upload``,
    ``delete``, ``prune``) run one at a time.
    """

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None, create: bool = True) -> None:
        """Open the store ``settings`` name (see :meth:`open`); ``embedder``, if given, is used instead of
        loading ``settings.model`` and is left open for its owner."""
        self.settings = settings
        self.collection = settings.collection
        if VERSION_RE.fullmatch(self.collection):
            raise ConfigError(
                f"collection {self.collection!r}: a name ending in .v<number> is a version's name "
                "(docvec names the versions of a collection so); choose another collection name"
            )
        reserve = settings.store_reserve_mb * MB
        self.pages = PageStore(settings.data_dir / "pages", reserve=reserve)
        self.uploads = settings.data_dir / "uploads"
        self._queue = UploadQueue(self.uploads)
        # counts an upload's pages before it is accepted: PDFium runs in a worker process, never in this one
        self._inspector: Renderer | None = None
        self._inspector_lock = threading.Lock()
        self._store: Store = open_store(
            path=settings.data_dir / "qdrant",
            url=settings.qdrant_url,
            api_key=settings.qdrant_api_key,
            reserve=reserve,
            create=create,
        )
        self._live = LiveVersion(settings, self._store, self.pages, embedder=embedder)
        self._write_lock = threading.RLock()  # writers take turns; a reindex holds it for its last pass
        self._reindex_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        where: Settings | str | Path | None = None,
        *,
        embedder: Embedder | None = None,
        create: bool = True,
        **overrides: Any,
    ) -> Index:
        """Open an index.

        ``where`` is a :class:`Settings`, a data folder (everything else from ``DOCVEC_*`` variables and
        ``.env``), or ``None`` (all of it from there); ``overrides`` replace single settings, e.g.
        ``collection="papers"`` or ``text=False``. With ``create=False`` an embedded store that does
        not exist yet is created (and its folder locked) only by the first write, so that only looking
        leaves no trace.
        """
        return cls(settings_for(where, **overrides), embedder=embedder, create=create)

    @property
    def embedder(self) -> Embedder:
        """The model, loaded on first use with the settings that fit the collection (see
        :func:`docvec._pipeline._fit.fitting_settings`); after the collection is switched to a version
        another model (or size) made, the one that fits it."""
        return self._live.embedder()

    @property
    def model(self) -> str:
        """The model the index searches and writes with, as named (a registry name, a folder): the
        settings' ``model``, or the collection's own when the settings leave it to the collection. Loads
        it, as :attr:`embedder` does."""
        return self._live.model()

    def prepare(self) -> None:
        """Load the model and create the collection if it is missing: a server calls this at start, so that
        a bad model, or one that does not fit the collection, fails then and the first request pays for
        nothing."""
        with self._write_lock:
            self._live.ingest_stage()
        if self.settings.rerank_model:
            self.reranker()

    def reranker(self) -> Reranker:
        """The reranker (``settings.rerank_model``), loaded once, on first use, with the embedder's threads
        and GPU settings; :class:`~docvec.ConflictError` when the settings name none."""
        return self._live.reranker()

    # -- verbs ---------------------------------------------------------------------------------------

    def add(
        self,
        paths: Sequence[str | Path],
        *,
        tags: records.Tags = (),
        recursive: bool = True,
        prune: bool = False,
        progress: ProgressFn | None = None,
    ) -> records.IngestReport:
        """Index files, folders (recursively) and glob patterns of PDFs and images.

        Unchanged files are skipped, changed ones replaced, moved ones updated without re-embedding;
        ``prune`` also removes documents whose files are gone. ``tags`` are ``key=value`` strings stored
        with every page. Bad documents and pages are failure records in the report, and the run goes on.
        """
        tag_list = records.parse_tags(tags)  # before any work: a bad tag is the caller's mistake
        with self._write_lock:
            ingestor = self._live.ingest_stage()
            return ingestor.run(paths, recursive=recursive, prune=prune, tags=tag_list, progress=progress)

    def keep_upload(self, stream: BinaryIO, *, name: str | None = None, limit: int) -> SourceDocument:
        """The first half of :meth:`add_upload`: keep the upload, identify it and count its pages, without
        indexing it yet. Refused with nothing kept: over ``limit`` bytes or ``settings.max_upload_pages``
        pages (:class:`~docvec.TooLargeError`), empty or no document (:class:`~docvec.RenderError`), or a
        document that cannot be opened (:class:`~docvec.IngestError`, with the reason).

        What it keeps waits in the upload queue's folder under a name of its own (never the
        ``<sha256>.<ext>`` another upload of the same bytes shares): :meth:`add_upload` indexes it, or
        :meth:`queue_upload` queues it for :meth:`index_queued`; one neither takes is collected by
        :meth:`gc` after :data:`UPLOAD_GRACE_S`.
        """
        reserve = self.settings.store_reserve_mb * MB
        document = self._queue.receive(stream, name=name, limit=limit, reserve=reserve)
        try:
            pages = self._count_pages(document)
        except BaseException:
            document.path.unlink(missing_ok=True)
            raise
        return dataclasses.replace(document, page_count=pages)

    def _count_pages(self, document: SourceDocument) -> int:
        """An upload's pages, counted by a render worker; over ``settings.max_upload_pages`` is refused."""
        with self._inspector_lock:
            if self._inspector is None:
                render = self.settings.render
                # it only opens documents: the page budget is never used
                self._inspector = Renderer(
                    workers=1,
                    target_pixels=1,
                    timeout_s=render.timeout_s,
                    memory_limit=render.max_memory_mb * MB,
                )
            try:
                count = self._inspector.open(document.path, document.kind).page_count
            except RenderError as e:
                # the reason an ingest gives, about the client's name: never the queue's own file name
                raise IngestError(
                    f"{document.name} could not be indexed: {e.reason}",
                    [{"path": document.name, "reason": e.reason}],
                ) from None
        most = self.settings.max_upload_pages
        if count > most:
            raise TooLargeError(
                f"{count} pages, over the {most} an upload may have (DOCVEC_MAX_UPLOAD_PAGES): split it, "
                "or index it from a file the server can read (`docvec ingest`)",
                item=document.name,
            )
        return count

    def add_upload(
        self,
        upload: BinaryIO | SourceDocument,
        *,
        name: str | None = None,
        tags: records.Tags = (),
        limit: int | None = None,
        progress: PageFn | None = None,
    ) -> records.Upload:
        """Keep an uploaded document under the data folder's ``uploads/`` and index it.

        ``upload`` is the byte stream (then ``limit``, its largest size, is required), or what
        :meth:`keep_upload` kept of it. ``name`` is the client's file name: the document's display name,
        and the only name its messages use. Content already indexed (from a file, or an earlier upload) is
        reported as that document, and no second copy is kept. Refused with nothing kept: a bad tag
        (:class:`~docvec.InputError`), more than ``limit`` bytes or ``settings.max_upload_pages`` pages
        (:class:`~docvec.TooLargeError`), no document (:class:`~docvec.RenderError`), or a document that
        cannot be indexed (:class:`~docvec.IngestError`, with the reasons). ``progress`` hears of each
        page.
        """
        tag_list = records.parse_tags(tags)
        if isinstance(upload, SourceDocument):
            document = upload
        elif limit is None:
            raise InputError("add_upload needs the largest size it may take (limit)")
        else:
            document = self.keep_upload(upload, name=name, limit=limit)
        shown = name or document.name
        with self._write_lock:
            # out of the queue's folder under the lock that deletes take too: a delete of the document these
            # bytes were indexed as cannot remove the copy before it is indexed again
            document = self._queue.take(document)
            return self._index_kept(document, shown=shown, tags=list(tag_list), progress=progress)

    def queue_upload(self, document: SourceDocument, *, tags: records.Tags = ()) -> QueuedUpload:
        """Queue what :meth:`keep_upload` kept, durably, to be indexed by :meth:`index_queued`: it survives a
        stop or a crash of this process until then (see :meth:`recover_uploads`)."""
        return self._queue.add(document, collection=self.collection, tags=list(records.parse_tags(tags)))

    def index_queued(self, upload_id: str, *, progress: PageFn | None = None) -> records.Upload:
        """Index a queued upload (see :meth:`queue_upload`), as :meth:`add_upload` does, and drop it from the
        queue once it is indexed or has failed.

        ``progress`` hears of each page, and may stop the work between two pages by raising
        :class:`~docvec._pipeline._ingest.Interrupted`: a cancel removes what was written of the document
        and the upload itself; a stop keeps both (the pages written stay, unsearchable, and the upload
        stays queued), and indexing it again resumes after them. :class:`~docvec.NotFoundError` when the
        queue has no such upload, or its file is gone (an interrupted upload whose document was deleted
        since).
        """
        with self._write_lock:
            record = self._queue.get(upload_id)
            if record is None:
                raise NotFoundError(f"no queued upload {upload_id}")
            document = self._queue.start(record)
            if document is None:
                self._queue.remove(record)
                raise NotFoundError(
                    f"{record.name} could not be indexed: its document was deleted before the upload "
                    "was resumed"
                )
            try:
                upload = self._index_kept(document, shown=record.name, tags=record.tags, progress=progress)
            except Interrupted as e:
                if e.cancelled:
                    self._abandon(record, document)
                raise  # a stop: the record stays, and the next start resumes the document
            except Exception:
                self._queue.remove(record)  # a failure is final: the job says why
                raise
            self._queue.remove(record)
            return upload

    def drop_queued(self, upload_id: str) -> bool:
        """Remove a queued upload that no thread is indexing (a job cancelled before it started), with its
        file; whether there was one. A file kept in ``uploads/`` stays for :meth:`gc` to judge."""
        record = self._queue.get(upload_id)
        if record is not None:
            self._queue.remove(record)
        return record is not None

    def recover_uploads(self) -> list[QueuedUpload]:
        """The uploads to this collection a server indexes when it starts: its queue, the uploads a stop or
        a crash interrupted first; and, queued now as interrupted ones, the uploaded documents left
        part-written without a record (by a server of an older docvec)."""
        with self._write_lock:
            records = [r for r in self._queue.records() if r.collection == self.collection]
            version = self._live.version()
            if version is None:
                return records
            known = {r.doc_id for r in records}
            for page in _documents.unfinished_uploads(self._store, version, self.uploads):
                path = Path(page.source)
                if page.doc_id in known or not path.is_file():
                    continue
                log.info("%s: an upload left part-written; indexing it again", page.display_name)
                records.insert(0, self._queue.adopt(page, path, collection=self.collection))
                known.add(page.doc_id)
            return records

    def _index_kept(
        self, document: SourceDocument, *, shown: str, tags: list[str], progress: PageFn | None
    ) -> records.Upload:
        """Index an upload kept in ``uploads/``; the caller holds the write lock. The copy goes when it is
        not what the document is read from (not indexed, or indexed from elsewhere) and no page uses it."""
        ingestor = self._live.ingest_stage()
        version = ingestor.collection
        report = ingestor.ingest(document, tags=tags, progress=progress)
        ingestor.commit()
        stored = self._store.page(version, Filter(doc_ids=(document.doc_id,)))
        kept = stored is not None and stored.source == str(document.path)
        if not kept and not _documents.source_in_use(self._store, self.collection, str(document.path)):
            document.path.unlink(missing_ok=True)
        if stored is None:
            raise IngestError(
                f"{shown} could not be indexed: " + "; ".join(f.reason for f in report.failures),
                [{**f.model_dump(exclude_none=True), "path": shown} for f in report.failures],
            )
        return records.Upload(
            doc_id=document.doc_id,
            source=stored.source,
            name=stored.display_name,
            pages=self._store.count(version, Filter(doc_ids=(document.doc_id,))),
            already_indexed=not report.documents_indexed,
        )

    def _abandon(self, record: QueuedUpload, document: SourceDocument) -> None:
        """A cancelled upload, interrupted part-way: its pages written so far go (and the page images only
        they showed), its kept copy unless a document uses it, and its record."""
        version = self._live.ingest_stage().collection
        images = _documents.remove_unfinished(self._store, version, document.doc_id)
        if images:
            _gc.release(self._store, self.pages, images, before=time.time() - self._gc_grace())
        if not _documents.source_in_use(self._store, self.collection, str(document.path)):
            document.path.unlink(missing_ok=True)
        self._queue.remove(record)

    def search(
        self,
        query: str | records.Search,
        k: int | None = None,
        filter: records.SearchFilter | None = None,
        **options: Unpack[records.SearchOptions],
    ) -> records.SearchResult:
        """The ``k`` pages (1..100, default 5) that best match ``query``, best first, among those the
        ``filter`` option admits: a :class:`~docvec.SearchResult` of :class:`~docvec.Hit`, which says how
        it was answered (``for hit in index.search(...)`` reads its hits).

        ``query`` is a text, with the options of :class:`~docvec.Search` as keyword arguments, or a
        :class:`~docvec.Search` itself (the same value the other faces take; options given beside it
        replace its own). ``mode`` (default: ``settings.search_mode``) is ``dense``, ``multi`` or
        ``hybrid`` (the dense vector's best ``prefetch`` pages reranked by MaxSim), ``text`` (keywords in
        the pages' text: no model is loaded), one of the first three fused with text (``dense+text`` ...),
        or ``auto`` (:meth:`search_mode` says which). On a collection with text every hit carries a snippet
        of its page's text around the query's terms, and with ``with_text`` the page's whole text (for a
        RAG caller: one round trip). ``rerank`` (default: ``settings.rerank``, or ``k`` when that is more;
        0: off) adds a second stage: the first stage finds the best ``rerank`` pages (``k`` or more), the
        reranker (``settings.rerank_model``) reads each with the query, and the ``k`` it scores highest
        come back in its order, each with its ``rerank_score`` beside the first stage's ``score``; without
        a reranker named, :class:`~docvec.ConflictError`.

        The search is checked before the model is loaded (:class:`~docvec.InputError`, in the words of
        docvec's rules). Searching a collection nothing was indexed into raises
        :class:`~docvec.CollectionNotFoundError` saying so, and one whose vectors another model (or vector
        size) made :class:`~docvec.CollectionMismatchError`. A search under way while the collection is
        switched to a new version is answered by one version or the other, whole.
        """
        request = records.Search.of(query, k=k, filter=filter, **options)
        depth = records.rerank_depth(request.rerank, self.settings.rerank, request.k)
        reranker = self.reranker() if depth else None  # no reranker named: refused before any work
        try:
            return self._search(self._live.version(), request, depth, reranker)
        except (CollectionNotFoundError, ModelError):
            # the version was dropped, or the model replaced, between the lookup and the search: once
            # more with what is live now
            return self._search(self._live.version(refresh=True), request, depth, reranker)

    def _search(
        self, version: str | None, request: records.Search, depth: int, reranker: Reranker | None
    ) -> records.SearchResult:
        """``request`` answered by ``version``: the first stage's best ``depth`` pages (``k`` without a
        second stage) reranked by ``reranker``."""
        if version is None:
            raise CollectionNotFoundError(
                f"nothing is indexed in collection {self.collection!r} at {self._store.where}: "
                "run `docvec ingest` first"
            )
        mode = self.search_mode(request.mode)
        # a keyword search needs no model: it answers before one is loaded
        embedder = None if mode == "text" else self._live.for_search(version)
        # the first stage's: the mode decided, the reranker's depth, the hybrid depth's default
        prefetch = request.prefetch or self.settings.prefetch
        first = request.model_copy(update={"mode": mode, "k": depth or request.k, "prefetch": prefetch})
        found = _search.search(
            embedder,
            self._store,
            version,
            first,
            text=self._live.text(version),
            weight=self.settings.text_weight,
        )
        if reranker is not None:
            found = _rerank.rerank(reranker, self.pages, request.query, found, request.k)
        return records.SearchResult(
            query=request.query, k=request.k, mode=mode, rerank=depth, hits=[f.hit() for f in found]
        )

    def search_mode(self, mode: records.ModeChoice | None = None) -> records.SearchMode:
        """The mode a search with ``mode`` (default: ``settings.search_mode``) runs in: ``auto`` is hybrid
        on a multi-vector collection and dense otherwise, fused with text (``hybrid+text``, ``dense+text``)
        on a collection with text; ``multi`` and ``hybrid`` need a multi-vector collection, ``text`` and the
        fused modes a collection with text (:class:`~docvec.ConflictError` otherwise)."""
        version = self._live.version()
        multi = version is not None and self._store.token_dim(version) is not None
        text = version is not None and self._live.text(version) is not None
        return _search.choose_mode(
            mode or self.settings.search_mode, multivector=multi, text=text, collection=self.collection
        )

    def documents(self, *, offset: int = 0, limit: int = 100) -> records.DocumentList:
        """Indexed documents ordered by name (then source path), ``limit`` of them from ``offset``, with the
        total. A document still being written (a long upload under way, a run a stop or a crash cut short) is
        listed as such (``state`` ``"writing"``, ``pages_written``), with no page counted as indexed: none of
        its pages is searchable yet."""
        version = self._live.version()
        if version is None:
            return records.DocumentList(total=0, offset=offset, limit=limit, documents=[])
        return _documents.list_documents(self._store, version, offset=offset, limit=limit)

    def pages_of(self, doc_id: str) -> list[records.Page]:
        """A document's indexed pages in order; :class:`~docvec.NotFoundError` for an unknown document."""
        return [records.Page.of(p) for p in self.stored_pages(doc_id)]

    def stored_pages(self, doc_id: str) -> list[records.PagePayload]:
        """Everything stored with each of a document's pages, in order (its source path on this machine,
        its text, what made its vectors: the operator's ``GET /documents/{id}/pages``);
        :class:`~docvec.NotFoundError` for an unknown document."""
        return _documents.stored_pages(self._store, self._version_or_none(), doc_id)

    def page_text(self, doc_id: str, page: int) -> records.PageText:
        """The page's whole text as the index keeps it ("" for a page without text), and where it came from;
        :class:`~docvec.NotFoundError` for an unknown document or page, :class:`~docvec.ConflictError` on
        a collection that keeps no text."""
        version = self._version_or_none()
        if self._live.text(version) is None:
            raise ConflictError(
                f"collection {self.collection!r} keeps no text: `docvec reindex --text` adds it"
            )
        return _documents.page_text(self._store, version, doc_id, page)

    def page_file(self, doc_id: str, page: int, *, thumbnail: bool = False) -> Path:
        """The page's image as rendered for the model (PNG), or its thumbnail (JPEG, at most 256 px)."""
        version = self._version_or_none()
        return _documents.page_file(self._store, version, self.pages, doc_id, page, thumbnail=thumbnail)

    def document_file(self, doc_id: str) -> records.DocumentFile:
        """The document's file as it was indexed (an upload's kept copy included), with its display name
        and kind; :class:`~docvec.NotFoundError` when the file is gone or has changed since."""
        return _documents.document_file(self._store, self._version_or_none(), doc_id)

    def _version_or_none(self) -> str:
        version = self._live.version()
        if version is None:
            raise NotFoundError(f"nothing is indexed in collection {self.collection!r}")
        return version

    def delete(self, target: str, *, by: Literal["auto", "doc_id", "path"] = "auto") -> int:
        """Remove a document by id, or every document read from a path; returns the pages removed.

        ``by="auto"`` reads an existing file, or anything with a path separator, as a path, and anything
        else as a document id or the start of one that only one document's id has (for people typing at a
        prompt); a server passes ``by="doc_id"`` so that nothing is guessed. An uploaded document's kept
        copy goes with it, and so do its page images that no version of any collection shows; a user's
        own files are never touched.
        """
        with self._write_lock:
            version = self._live.version()
            if version is None:
                return 0
            if by == "auto":
                flt = _documents.target_filter(self._store, version, target)
            elif by == "path":
                flt = _documents.source_filter(target)
            else:
                flt = Filter(doc_ids=(target,))
            removed, images = _documents.delete(
                self._store, self.collection, version, flt, uploads=self.uploads
            )
            if images:
                _gc.release(self._store, self.pages, images, before=time.time() - self._gc_grace())
            return removed

    def prune(self) -> int:
        """Remove the documents whose files are gone; returns how many."""
        with self._write_lock:
            ingestor = self._live.ingest_stage()
            removed = ingestor.prune()
            ingestor.commit()
        return removed

    def count(self) -> int:
        """Pages in the index (0 when nothing was indexed yet)."""
        version = self._live.version()
        return 0 if version is None else self._store.count(version, Filter(finished=True))

    # -- versions ------------------------------------------------------------------------------------

    def reindex(
        self,
        spec: records.ReindexSpec | None = None,
        *,
        progress: ProgressFn | None = None,
        settle: float | None = None,
    ) -> records.ReindexReport:
        """Build a new version of the collection as ``spec`` asks (another model, vector size, page budget
        or kind of pages; what it leaves unset is the live version's, or what the settings name
        explicitly) from what the index holds, and switch to it once it is complete; searches read the old
        version until then.

        A reindex interrupted at any point resumes when run again with the same spec; ``spec.drop_old``
        removes the old version (and the page images only it used) after the switch. A new version that
        would lack pages the live one has is not switched to (nor the old one dropped) unless
        ``spec.allow_loss``: the report says so (``switched`` false, ``pages_missing``, ``note``). A size or
        page budget the model does not offer is an :class:`~docvec.InputError`, before any work. ``settle``
        is how long to wait after switching on a Qdrant server for processes that had not seen it yet
        (default: twice the time they take to see it). See :mod:`docvec._pipeline._reindex`.
        """
        spec = spec or records.ReindexSpec()
        with self._reindex_lock:
            report = self._live.reindex(spec, write_lock=self._write_lock, settle=settle, progress=progress)
            if report.dropped_old:
                self.gc()
            return report

    def check_reindex(self, spec: records.ReindexSpec) -> None:
        """Refuse at once, as :meth:`reindex` would before any work, a ``spec`` that keeps the model and
        asks for a vector size or page budget it does not offer (:class:`~docvec.InputError` naming them),
        without loading another model: a server checks a reindex so before it answers. A spec naming
        another model is checked as that model opens, by :meth:`reindex`."""
        self._live.check_reindex(spec)

    def versions(self) -> list[records.VersionInfo]:
        """The collection's versions, oldest first: model, size, pages, and which one is live."""
        return list_versions(self._store, self.collection)

    def drop_version(self, version: str) -> records.GcReport:
        """Delete a version that is not live, then the page images no version uses any more."""
        with self._write_lock:
            if version not in self._store.versions(self.collection):
                raise NotFoundError(f"collection {self.collection!r} has no version {version!r}")
            self._store.drop(version)
        return self.gc()

    def gc(self, *, grace_s: float | None = None) -> records.GcReport:
        """Remove the page images that no version of any collection in the store shows, and the uploaded
        files that no document of any version uses and no queued upload needs.

        An image or an upload written or reused less than ``grace_s`` seconds ago is kept, so that a run in
        progress in another process never loses one (default: none on the embedded store, whose writers
        all wait for this one; a day with a Qdrant server, whose writers may be anywhere). The leftovers of
        uploads never finished (a temporary file, an upload kept and never queued) are kept for
        ``grace_s`` or, by default, :data:`UPLOAD_GRACE_S`: a request may be receiving one.
        """
        grace = self._gc_grace() if grace_s is None else grace_s
        now = time.time()
        with self._write_lock:
            report = _gc.collect(self._store, self.pages, before=now - grace)
            removed, freed = _gc.collect_uploads(
                self._store,
                self._queue,
                before=now - grace,
                stale=now - (UPLOAD_GRACE_S if grace_s is None else grace_s),
            )
        return report.model_copy(update={"uploads_removed": removed, "upload_bytes_freed": freed})

    def _gc_grace(self) -> float:
        return GC_GRACE_S if self._store.backend.resolves_aliases else 0.0

    def advertise(self, api: str, *, token: str, reads_only: bool = False) -> None:
        """Record in the embedded store's owner record that this process serves the index at ``api``: other
        docvec processes (commands, flows) then send their work there (:func:`docvec.connect`), with
        ``token``, which the record keeps for this user's eyes only (the server takes it as its owner's).
        ``reads_only``: it answers searches and reads only (a command that holds the store); writers wait."""
        self._store.advertise(api=api, token=token, **({"reads_only": True} if reads_only else {}))

    def withdraw(self) -> None:
        """Take back :meth:`advertise`: other processes wait for the store again instead of sending their
        work here (a server about to stop)."""
        self._store.advertise()

    # -- lifetime ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the render workers, free the model (unless it was passed in) and the reranker, and close the
        store."""
        try:
            self._live.close()
            if self._inspector is not None:
                self._inspector.close()
        finally:
            self._store.close()

    def __repr__(self) -> str:
        return f"Index({self.collection!r} at {self._store.where})"
