"""One contract for an index, local or served: :class:`IndexLike`, the verbs :class:`docvec.Index` (in
this process) and :class:`docvec.RemoteIndex` (a running ``docvec serve``) both offer, checked by mypy
below.

Code that takes either, as the command line and the flows do (:func:`docvec.connect` hands out one or the
other), types it as :class:`IndexLike`. The same call raises the same error class with the same message on
both (the REST API carries the class across). What only a process holding the store does (its model,
staging uploads, preparing and advertising a server) is :class:`docvec.Index`'s alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO, Literal, Protocol, Self, Unpack

from . import _records as records
from ._config import Settings
from ._pipeline._ingest import PageFn, ProgressFn

__all__ = ["IndexLike"]


class IndexLike(Protocol):
    """The verbs of an index of documents (see :class:`docvec.Index` for what each does)."""

    settings: Settings
    collection: str

    # -- writing ---------------------------------------------------------------------------------------

    def add(
        self,
        paths: Sequence[str | Path],
        *,
        tags: records.Tags = (),
        recursive: bool = True,
        prune: bool = False,
        progress: ProgressFn | None = None,
    ) -> records.IngestReport:
        """Index files, folders (recursively) and glob patterns of PDFs and images."""
        ...

    def add_upload(
        self,
        upload: BinaryIO,
        *,
        name: str | None = None,
        tags: records.Tags = (),
        limit: int | None = None,
        progress: PageFn | None = None,
    ) -> records.Upload:
        """Keep an uploaded document and index it."""
        ...

    def delete(self, target: str, *, by: Literal["auto", "doc_id", "path"] = "auto") -> int:
        """Remove a document by id, or every document read from a path; returns the pages removed."""
        ...

    def prune(self) -> int:
        """Remove the documents whose files are gone; returns how many."""
        ...

    # -- reading ---------------------------------------------------------------------------------------

    def search(
        self,
        query: str | records.Search,
        k: int | None = None,
        filter: records.SearchFilter | None = None,
        **options: Unpack[records.SearchOptions],
    ) -> records.SearchResult:
        """The ``k`` pages that best match ``query`` (a text and the options of :class:`docvec.Search`, or
        a search), best first, and how the search was answered."""
        ...

    def search_mode(self, mode: records.ModeChoice | None = None) -> records.SearchMode:
        """The mode a search with ``mode`` runs in."""
        ...

    def documents(self, *, offset: int = 0, limit: int = 100) -> records.DocumentList:
        """Indexed documents ordered by name (then source path), with the total."""
        ...

    def pages_of(self, doc_id: str) -> list[records.Page]:
        """A document's indexed pages in order."""
        ...

    def page_file(self, doc_id: str, page: int, *, thumbnail: bool = False) -> Path:
        """The page's image as rendered for the model (PNG), or its thumbnail (JPEG)."""
        ...

    def page_text(self, doc_id: str, page: int) -> records.PageText:
        """The page's whole text as the index keeps it."""
        ...

    def document_file(self, doc_id: str) -> records.DocumentFile:
        """The document's file as it was indexed, with its display name and kind."""
        ...

    def count(self) -> int:
        """Pages in the index."""
        ...

    # -- versions --------------------------------------------------------------------------------------

    def reindex(
        self, spec: records.ReindexSpec | None = None, *, progress: ProgressFn | None = None
    ) -> records.ReindexReport:
        """Build a new version of the collection as ``spec`` asks, and switch to it once complete."""
        ...

    def versions(self) -> list[records.VersionInfo]:
        """The collection's versions, oldest first."""
        ...

    def drop_version(self, version: str) -> records.GcReport:
        """Delete a version that is not live, then the page images no version uses any more."""
        ...

    def gc(self) -> records.GcReport:
        """Remove the page images that no version of any collection shows."""
        ...

    # -- lifetime --------------------------------------------------------------------------------------

    def close(self) -> None:
        """Release what the index holds."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


if TYPE_CHECKING:
    from ._client import RemoteIndex
    from ._index import Index

    def _local(index: Index) -> IndexLike:
        # mypy proves here that both faces of an index keep the one contract
        return index

    def _served(index: RemoteIndex) -> IndexLike:
        return index
