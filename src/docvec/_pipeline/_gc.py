"""Collecting the page store: the page images (and thumbnails) that no version of any collection shows.

The page store is shared by every collection and version in a data folder, so a file can go only when no
point anywhere refers to it. Files are listed before references are read: a file written after the
listing is not a candidate, and one written before it is kept if a point refers to it by the time the
references are read. A file written or reused after ``before`` is never removed, which protects a run in
another process that wrote a page's image but not yet its point.

Uploads are collected the same way (:func:`collect_uploads`): a kept upload that no point of any version
refers to, and that no queued upload needs, goes, as do the leftovers of uploads never finished (a
temporary file of one being received, an upload kept and never queued) once they are old.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from .._errors import ForeignCollectionError
from .._records import GcReport
from .._store import Filter, Store
from .._store._pages import PageStore
from ._queue import UploadQueue

__all__ = ["collect", "collect_uploads", "referenced", "release"]

log = logging.getLogger("docvec")

_CHUNK = 256  # images per lookup


def _versions(store: Store) -> Iterator[str]:
    """Every version of every docvec collection in the store (a server's other collections left out)."""
    for name in store.collections():
        for version in store.versions(name):
            try:
                store.count(version)
            except ForeignCollectionError:
                log.debug("%s is not a docvec collection: its points show no page images", version)
                continue
            yield version


def referenced(store: Store) -> set[str]:
    """The page store files (images and thumbnails) that some point of some version refers to."""
    keep: set[str] = set()
    for version in _versions(store):
        for _, page in store.pages(version, batch=1024):
            keep.update((page.image, page.thumbnail))
    return keep


def collect(store: Store, pages: PageStore, *, before: float) -> GcReport:
    """Remove every file of ``pages`` that no point refers to and that was last written before ``before``."""
    listed = list(pages.files())
    keep = referenced(store)
    removed, freed = pages.remove((rel for rel, _, _ in listed if rel not in keep), before=before)
    if removed:
        log.info("page store %s: removed %d unused files (%d bytes)", pages.root, removed, freed)
    return GcReport(files_removed=removed, bytes_freed=freed, files_kept=len(listed) - removed)


def release(store: Store, pages: PageStore, files: set[str], *, before: float) -> int:
    """After points were deleted: remove those of ``files`` (their images and thumbnails) that no point
    refers to any more; returns how many files went."""
    images = sorted(f for f in files if f.endswith(".png"))
    used: set[str] = set()
    for version in _versions(store):
        for start in range(0, len(images), _CHUNK):
            chunk = tuple(images[start : start + _CHUNK])
            used.update(page.image for _, page in store.pages(version, Filter(images=chunk), batch=1024))
    unused = [f for image in images if image not in used for f in (image, pages.thumbnail_of(image))]
    return pages.remove(unused, before=before)[0]


def collect_uploads(store: Store, queue: UploadQueue, *, before: float, stale: float) -> tuple[int, int]:
    """Remove the uploads no point of any version of any collection was read from and no record of
    ``queue`` needs, last written before ``before``, and the queue folder's files without a record and the
    temporary files of both folders last written before ``stale``; returns the files removed and their
    bytes."""
    listed = _files(queue.uploads) + _files(queue.folder)
    needed = queue.needed()
    uploads = queue.uploads.resolve()  # sources are stored resolved
    used = {
        Path(source).name
        for version in _versions(store)
        for source in store.facet(version, "source")
        if Path(source).parent == uploads
    }
    removed = freed = 0
    for path, size, mtime in listed:
        hidden = path.name.startswith(
            "."
        )  # a temporary file: an upload being received, a record being written
        if path in needed or (path.parent == queue.folder and path.suffix == ".json" and not hidden):
            continue
        if path.parent == queue.uploads and not hidden:
            if path.name in used or mtime >= before:
                continue
        elif mtime >= stale:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        log.info(
            "uploads: removed %s (%s)", path.name, "a temporary file" if hidden else "no document uses it"
        )
        removed, freed = removed + 1, freed + size
    return removed, freed


def _files(folder: Path) -> list[tuple[Path, int, float]]:
    """The plain files in ``folder`` (not below it), each with its size and last write time."""
    found = []
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return []
    for path in entries:
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if path.is_file() and not path.is_symlink():
            found.append((path, st.st_size, st.st_mtime))
    return found
