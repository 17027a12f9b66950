"""Collecting the page store: the page images (and thumbnails) that no version of any collection shows.

The page store is shared by every collection and version in a data folder, so a file can go only when no
point anywhere refers to it. Files are listed before references are read: a file written after the
listing is not a candidate, and one written before it is kept if a point refers to it by the time the
references are read. A file written or reused after ``before`` is never removed, which protects a run in
another process that wrote a page's image but not yet its point.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from .._errors import ForeignCollectionError
from .._records import GcReport
from .._store import Filter, Store
from .._store._pages import PageStore

__all__ = ["collect", "referenced", "release"]

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
        for _, payload in store.scroll(version, batch=1024):
            keep.update(str(payload[f]) for f in ("image", "thumbnail") if payload.get(f))
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
            used.update(
                str(p.get("image")) for _, p in store.scroll(version, Filter(images=chunk), batch=1024)
            )
    unused = [f for image in images if image not in used for f in (image, pages.thumbnail_of(image))]
    return pages.remove(unused, before=before)[0]
