"""The documents stage: what is indexed (a paged list, one document's pages, their stored images) and
removing documents, with the uploaded copies that go with them."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path

from .._errors import InputError, NotFoundError, RenderError
from .._records import (
    DocumentFile,
    DocumentList,
    DocumentSummary,
    PagePayload,
    PageText,
    is_source_name,
    shortened,
)
from .._store import Filter, Store
from .._store._pages import PageStore
from ._sources import missing_reason, sha256_of

__all__ = [
    "delete",
    "display_names",
    "document_file",
    "list_documents",
    "page_file",
    "page_text",
    "remove_unfinished",
    "source_filter",
    "source_in_use",
    "sources_named",
    "stored_pages",
    "summary",
    "target_filter",
    "unfinished_uploads",
]

log = logging.getLogger("docvec")

_HEX = re.compile(r"[0-9a-f]+")
#: An upload's kept copy, ``uploads/<sha256>.<ext>`` (docvec._pipeline._queue): the one kind of document
#: whose name (the client's) is not its file's; an ingested file's name is its path's last part.
_KEPT_UPLOAD = re.compile(r"[0-9a-f]{64}\.[0-9A-Za-z]+")


def display_names(store: Store, collection: str, sources: Iterable[str]) -> dict[str, str]:
    """The name of the document read from each of ``sources``: its file's name, or, for an upload's kept
    copy, the name it was uploaded under (read from one of its pages: only those are read)."""
    names: dict[str, str] = {}
    for source in sources:
        base = os.path.basename(source)
        page = store.page(collection, Filter(sources=(source,))) if _KEPT_UPLOAD.fullmatch(base) else None
        names[source] = page.display_name if page is not None else base
    return names


def _by_name(name: str, source: str) -> tuple[str, str, str]:
    # as a person reads a list of names: case aside first, then as written; one name's documents by path
    return name.casefold(), name, source


def list_documents(store: Store, collection: str, *, offset: int = 0, limit: int = 100) -> DocumentList:
    """Indexed documents, one entry each, ordered by name (an upload's original name, a file's own name),
    then by source path and id, ``limit`` from ``offset``.

    By name, which every caller is shown as it is (a served index shows readers no path of its own, and
    an upload's source is where its copy is kept, named by its content): the order a list is read in."""
    # From the payload indexes: reading every point took 0.9-1.3 s at 100k pages, a page of 100
    # documents this way 0.15 s (and one more point read per upload, for its name).
    doc_ids, sources = store.facet(collection, "doc_id"), store.facet(collection, "source")
    listed: list[PagePayload] = []
    if len(doc_ids) == len(sources):
        # one source per document, as ingestion keeps it: a page of sources is a page of documents; any
        # one page holds its document's summary, and a source deleted meanwhile is skipped
        names = display_names(store, collection, sources)
        chosen = sorted(sources, key=lambda s: _by_name(names[s], s))[offset : offset + limit]
        listed = [p for source in chosen if (p := store.page(collection, Filter(sources=(source,))))]
    else:
        # a file being replaced (its new version written, the old one not yet removed): read it all
        docs: dict[str, PagePayload] = {}
        for _, page in store.pages(collection):
            docs.setdefault(page.doc_id, page)
        ordered = sorted(docs.values(), key=lambda p: (*_by_name(p.display_name, p.source), p.doc_id))
        listed = ordered[offset : offset + limit]
    return DocumentList(
        total=len(doc_ids),
        offset=offset,
        limit=limit,
        documents=[summary(store, collection, p) for p in listed],
    )


def summary(store: Store, collection: str, page: PagePayload) -> DocumentSummary:
    """A document's summary from one of its pages; one still being written says how many of its pages are
    stored (none is searchable yet)."""
    if page.finished:
        return DocumentSummary.of(page)
    return DocumentSummary.of(page, pages_written=store.count(collection, Filter(doc_ids=(page.doc_id,))))


def stored_pages(store: Store, collection: str, doc_id: str) -> list[PagePayload]:
    """A document's stored pages in page order (their text included); :class:`NotFoundError` for none."""
    pages = [p for _, p in store.pages(collection, Filter(doc_ids=(doc_id,)), with_text=True)]
    if not pages:
        raise NotFoundError(f"no document {doc_id}")
    return sorted(pages, key=lambda p: p.page)


def _stored_page(store: Store, collection: str, doc_id: str, number: int) -> PagePayload:
    found = next((p for p in stored_pages(store, collection, doc_id) if p.page == number), None)
    if found is None:
        raise NotFoundError(f"document {doc_id} has no indexed page {number}")
    return found


def page_file(
    store: Store, collection: str, pages: PageStore, doc_id: str, page: int, *, thumbnail: bool = False
) -> Path:
    """The stored image of a page, or its thumbnail, found through its stored page (never through a path a
    caller gives); :class:`NotFoundError` when there is none."""
    stored = _stored_page(store, collection, doc_id, page)
    field = "thumbnail" if thumbnail else "image"
    try:
        return pages.path(stored.thumbnail if thumbnail else stored.image)
    except NotFoundError:
        raise NotFoundError(
            f"page {page} of {doc_id}: the {field} file is missing from the page store"
        ) from None


def page_text(store: Store, collection: str, doc_id: str, page: int) -> PageText:
    """A page's whole text as stored ("" for a page without text); :class:`NotFoundError` when the
    document has no such indexed page."""
    stored = _stored_page(store, collection, doc_id, page)
    text = stored.text or ""
    return PageText(doc_id=doc_id, page=page, text=text, text_from=stored.text_from if text else None)


def document_file(store: Store, collection: str, doc_id: str) -> DocumentFile:
    """A document's file as it was indexed (an upload's kept copy included), with its display name and
    kind; :class:`NotFoundError` (naming no server path) when the file is gone or has changed since."""
    stored = stored_pages(store, collection, doc_id)[0]
    path = Path(stored.source)
    try:
        unchanged = path.is_file() and sha256_of(path) == stored.content_sha256
    except RenderError:  # unreadable now
        unchanged = False
    if not unchanged:
        raise NotFoundError(f"the file of document {doc_id} is no longer as it was indexed")
    return DocumentFile(path=path, name=stored.display_name, kind=stored.kind)


def source_filter(path: str) -> Filter:
    """The points of every document read from ``path`` (a file, or a folder's files), as stored: made
    absolute, links resolved."""
    try:
        return Filter(sources=(str(Path(path).expanduser().resolve()),))
    except ValueError:  # a NUL character: no file has such a name
        raise InputError("not a file name (it has a NUL character)", item=repr(path[:80])) from None


def sources_named(store: Store, collection: str, name: str) -> tuple[str, ...]:
    """The sources of the documents named ``name`` (an upload's original name, a file's own name): what a
    search filter's ``source`` without a path separator names. :class:`InputError` for a relative path,
    which names no stored source (they are absolute: ``--filter`` makes a path so)."""
    if not is_source_name(name):
        raise InputError(
            f"filter source {shortened(name)!r}: a source is an absolute path (a file, or a folder of them), "
            "or a document's name, without '/'"
        )
    # a file's name is its path's last part: only the uploads' kept copies need a page read
    candidates = [
        s
        for s in store.facet(collection, "source")
        if os.path.basename(s) == name or _KEPT_UPLOAD.fullmatch(os.path.basename(s))
    ]
    return tuple(sorted(s for s, n in display_names(store, collection, candidates).items() if n == name))


def target_filter(store: Store, collection: str, target: str) -> Filter:
    """Which points ``target`` names, for people typing at a prompt: an existing file, or anything with a
    path separator, is every document read from that path; otherwise a document id, or the start of one
    that only one document's id has (:class:`InputError` when several do)."""
    p = Path(target).expanduser()
    if missing_reason(p) is None or os.sep in target:
        return source_filter(target)
    if len(target) < 32 and _HEX.fullmatch(target):
        matches = sorted(d for d in store.facet(collection, "doc_id") if d.startswith(target))
        if len(matches) > 1:
            shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
            raise InputError(
                f"{len(matches)} documents have ids starting with {target!r} ({shown}): give more"
            )
        if matches:
            return Filter(doc_ids=(matches[0],))
    return Filter(doc_ids=(target,))


def delete(
    store: Store, collection: str, version: str, flt: Filter, *, uploads: Path
) -> tuple[int, set[str]]:
    """Remove the points of ``version`` (of ``collection``) matching ``flt``, durably; returns how many
    there were, and the page store files (images and thumbnails) they showed.

    A document that came as an upload has its file under ``uploads``: that copy goes too once no point of
    any version of the collection refers to it (another upload of the same bytes is the same file). A
    user's own files are never touched.
    """
    n = store.count(version, flt)
    if not n:
        return 0, set()
    sources: set[str] = set()
    images: set[str] = set()
    for _, page in store.pages(version, flt, batch=1024):
        sources.add(page.source)
        images.update((page.image, page.thumbnail))
    store.delete_where(version, flt)
    store.flush()
    uploads = uploads.resolve()  # sources are stored resolved
    for source in sources:
        path = Path(source)
        if path.parent == uploads and not source_in_use(store, collection, source):
            log.info("removing the uploaded copy %s", path)
            path.unlink(missing_ok=True)
    return n, images


def remove_unfinished(store: Store, version: str, doc_id: str) -> set[str]:
    """Remove the pages of ``doc_id`` that ``version`` holds still being written (a cancelled upload's);
    returns the page store files they showed. A complete document's pages are left alone."""
    unfinished: list[str] = []
    images: set[str] = set()
    for pid, page in store.pages(version, Filter(doc_ids=(doc_id,)), batch=1024):
        if not page.finished:
            unfinished.append(pid)
            images.update((page.image, page.thumbnail))
    if unfinished:
        store.delete(version, unfinished)
        store.flush()
    return images


def unfinished_uploads(store: Store, version: str, uploads: Path) -> list[PagePayload]:
    """One page of each uploaded document (read from a file under ``uploads``) that ``version`` holds
    part-written."""
    uploads = uploads.resolve()  # sources are stored resolved
    found = []
    for source in store.facet(version, "source"):
        if Path(source).parent != uploads:
            continue
        first = store.page(version, Filter(sources=(source,)))
        if first is not None and not first.finished:
            found.append(first)
    return found


def source_in_use(store: Store, collection: str, source: str) -> bool:
    """Whether a point of any version of ``collection`` was read from ``source``."""
    return any(store.count(v, Filter(sources=(source,))) for v in store.versions(collection))
