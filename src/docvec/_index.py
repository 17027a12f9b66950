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

import functools
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Literal

from . import _documents, _search
from ._closing import Closing
from ._config import Settings
from ._embed import Embedder
from ._errors import CollectionNotFoundError, IngestError, InputError
from ._fileio import MB
from ._ingest import Ingestor, PageFn, ProgressFn
from ._pagestore import PageStore
from ._provenance import check_same_vectors, embedding_info, recorded_info
from ._records import (
    DocumentList,
    Hit,
    IngestReport,
    PagePayload,
    SearchFilter,
    Upload,
    display_name,
    parse_tags,
)
from ._render import Renderer
from ._sources import SourceDocument, save_upload
from ._store import Filter, Store, open_store

__all__ = ["Index"]

log = logging.getLogger("docvec")


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
        reserve = settings.store_reserve_mb * MB
        self.pages = PageStore(settings.data_dir / "pages", reserve=reserve)
        self.uploads = settings.data_dir / "uploads"
        self._store: Store = open_store(
            path=settings.data_dir / "qdrant",
            url=settings.qdrant_url,
            api_key=settings.qdrant_api_key,
            reserve=reserve,
            create=create,
        )
        self._embedder = embedder
        self._owns_embedder = embedder is None
        self._ingestor: Ingestor | None = None
        self._renderer: Renderer | None = None
        self._model_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._search_checked = False  # whether the collection's vectors were found to fit the model

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
        ``collection="papers"`` or ``model="jina-v4"``. With ``create=False`` an embedded store that does
        not exist yet is created (and its folder locked) only by the first write, so that only looking
        leaves no trace.
        """
        if isinstance(where, Settings):
            settings = where.model_copy(update=overrides) if overrides else where
        elif where is None:
            settings = Settings(**overrides)
        else:
            settings = Settings(data_dir=Path(where).expanduser(), **overrides)
        return cls(settings, embedder=embedder, create=create)

    # -- the model, loaded when first needed ---------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The model, loaded on first use."""
        with self._model_lock:
            if self._embedder is None:
                from ._hub import find_registered  # huggingface_hub: only when a model is opened

                find = functools.partial(find_registered, cache_dir=self.settings.cache_dir)
                self._embedder = Embedder.open(
                    self.settings.model,
                    self.settings.embed,
                    find_registered=find,
                    decode_budget=self.settings.render.max_memory_mb * MB,
                )
            return self._embedder

    def prepare(self) -> None:
        """Load the model and create the collection if it is missing: a server calls this at start, so that
        a bad model fails then and the first request pays for nothing."""
        self._ingest_stage()

    def _ingest_stage(self) -> Ingestor:
        embedder = self.embedder
        with self._model_lock:
            if self._ingestor is None:
                render = self.settings.render
                self._renderer = Renderer(
                    workers=render.workers,
                    target_pixels=embedder.bounds.max_pixels,
                    timeout_s=render.timeout_s,
                )
                self._ingestor = Ingestor(
                    embedder, self._store, self.pages, self._renderer, collection=self.collection
                )
            return self._ingestor

    # -- verbs ---------------------------------------------------------------------------------------

    def add(
        self,
        paths: Sequence[str | Path],
        *,
        tags: Sequence[str] = (),
        recursive: bool = True,
        prune: bool = False,
        progress: ProgressFn | None = None,
    ) -> IngestReport:
        """Index files, folders (recursively) and glob patterns of PDFs and images.

        Unchanged files are skipped, changed ones replaced, moved ones updated without re-embedding;
        ``prune`` also removes documents whose files are gone. ``tags`` are ``key=value`` strings stored
        with every page. Bad documents and pages are failure records in the report, and the run goes on.
        """
        tag_list = parse_tags(tags)  # before any work: a bad tag is the caller's mistake
        ingestor = self._ingest_stage()
        with self._write_lock:
            return ingestor.run(paths, recursive=recursive, prune=prune, tags=tag_list, progress=progress)

    def keep_upload(self, stream: BinaryIO, *, name: str | None = None, limit: int) -> SourceDocument:
        """The first half of :meth:`add_upload`: keep the upload (refused, with nothing kept, when over
        ``limit`` bytes, empty or no document) and identify it, without indexing it yet."""
        reserve = self.settings.store_reserve_mb * MB
        return save_upload(stream, self.uploads, limit=limit, name=name, reserve=reserve)

    def add_upload(
        self,
        upload: BinaryIO | SourceDocument,
        *,
        name: str | None = None,
        tags: Sequence[str] = (),
        limit: int | None = None,
        progress: PageFn | None = None,
    ) -> Upload:
        """Keep an uploaded document under the data folder's ``uploads/`` and index it.

        ``upload`` is the byte stream (then ``limit``, its largest size, is required), or what
        :meth:`keep_upload` kept of it. ``name`` is the client's file name: the document's display name,
        and the only name its messages use. Content already indexed (from a file, or an earlier upload) is
        reported as that document, and no second copy is kept. Refused with nothing kept: a bad tag
        (:class:`~docvec.InputError`), more than ``limit`` bytes (:class:`~docvec.TooLargeError`), no
        document (:class:`~docvec.RenderError`), or a document that cannot be indexed
        (:class:`~docvec.IngestError`, with the reasons). ``progress`` hears of each page.
        """
        tag_list = parse_tags(tags)
        ingestor = self._ingest_stage()
        if isinstance(upload, SourceDocument):
            document = upload
        elif limit is None:
            raise InputError("add_upload needs the largest size it may take (limit)")
        else:
            document = self.keep_upload(upload, name=name, limit=limit)
        shown = name or document.name
        with self._write_lock:
            report = ingestor.ingest(document, tags=tag_list, progress=progress)
            ingestor.commit()
            stored = next(iter(self._store.scroll(self.collection, Filter(doc_ids=(document.doc_id,)))), None)
            kept = stored is not None and stored[1].get("source") == str(document.path)
            # not indexed, or indexed from elsewhere: this copy is not needed (unless a page still uses it)
            if not kept and not self._store.count(self.collection, Filter(sources=(str(document.path),))):
                document.path.unlink(missing_ok=True)
        if stored is None:
            raise IngestError(
                f"{shown} could not be indexed: " + "; ".join(f.reason for f in report.failures),
                [{**f.model_dump(exclude_none=True), "path": shown} for f in report.failures],
            )
        payload = stored[1]
        return Upload(
            doc_id=document.doc_id,
            source=str(payload.get("source")),
            name=display_name(payload),
            pages=self._store.count(self.collection, Filter(doc_ids=(document.doc_id,))),
            already_indexed=not report.documents_indexed,
        )

    def search(self, query: str, k: int = 5, filter: SearchFilter | None = None) -> list[Hit]:
        """The ``k`` pages (1..100) that best match ``query``, best first, among those ``filter`` admits.

        The query and ``k`` are checked before the model is loaded. Searching a collection nothing was
        indexed into raises :class:`~docvec.CollectionNotFoundError` saying so, and one whose vectors
        another model (or vector size) made :class:`~docvec.CollectionMismatchError`.
        """
        _search.check_query(query, k)
        embedder = self.embedder
        if not self._search_checked:
            recorded = recorded_info(self._store, self.collection)
            check_same_vectors(
                recorded,
                embedding_info(embedder),
                collection=self.collection,
                where=self._store.where,
                for_search=True,
            )
            self._search_checked = recorded is not None
        try:
            return _search.search(embedder, self._store, self.collection, query, k=k, flt=filter)
        except CollectionNotFoundError:
            raise CollectionNotFoundError(
                f"nothing is indexed in collection {self.collection!r} at {self._store.where}: "
                "run `docvec ingest` first"
            ) from None

    def documents(self, *, offset: int = 0, limit: int = 100) -> DocumentList:
        """Indexed documents ordered by source path, ``limit`` of them from ``offset``, with the total."""
        if self.collection not in self._store.collections():
            return DocumentList(total=0, offset=offset, limit=limit, documents=[])
        return _documents.list_documents(self._store, self.collection, offset=offset, limit=limit)

    def pages_of(self, doc_id: str) -> list[PagePayload]:
        """A document's indexed pages in order; :class:`~docvec.NotFoundError` for an unknown document."""
        payloads = _documents.pages_of(self._store, self.collection, doc_id)
        return [PagePayload.model_validate(p) for p in payloads]

    def page_file(self, doc_id: str, page: int, *, thumbnail: bool = False) -> Path:
        """The page's image as rendered for the model (PNG), or its thumbnail (JPEG, at most 256 px)."""
        field = "thumbnail" if thumbnail else "image"
        return _documents.page_file(self._store, self.collection, self.pages, doc_id, page, field)

    def document_file(self, doc_id: str) -> tuple[Path, str, str]:
        """The document's file as it was indexed (an upload's kept copy included), with its display name
        and kind; :class:`~docvec.NotFoundError` when the file is gone or has changed since."""
        return _documents.document_file(self._store, self.collection, doc_id)

    def delete(self, target: str, *, by: Literal["auto", "doc_id", "path"] = "auto") -> int:
        """Remove a document by id, or every document read from a path; returns the pages removed.

        ``by="auto"`` reads an existing file, or anything with a path separator, as a path, and anything
        else as a document id or the start of one that only one document's id has (for people typing at a
        prompt); a server passes ``by="doc_id"`` so that nothing is guessed. An uploaded document's kept
        copy goes with it; a user's own files are never touched.
        """
        if by == "auto":
            flt = _documents.target_filter(self._store, self.collection, target)
        elif by == "path":
            flt = Filter(sources=(str(Path(target).expanduser().resolve()),))
        else:
            flt = Filter(doc_ids=(target,))
        with self._write_lock:
            return _documents.delete(self._store, self.collection, flt, uploads=self.uploads)

    def prune(self) -> int:
        """Remove the documents whose files are gone; returns how many."""
        ingestor = self._ingest_stage()
        with self._write_lock:
            removed = ingestor.prune()
            ingestor.commit()
        return removed

    def count(self) -> int:
        """Pages in the index (0 when nothing was indexed yet)."""
        if self.collection not in self._store.collections():
            return 0
        return self._store.count(self.collection)

    # -- lifetime ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the render workers, free the model (unless it was passed in) and close the store."""
        try:
            if self._renderer is not None:
                self._renderer.close()
            if self._owns_embedder and self._embedder is not None:
                self._embedder.close()
        finally:
            self._store.close()

    def __repr__(self) -> str:
        return f"Index({self.collection!r} at {self._store.where})"
