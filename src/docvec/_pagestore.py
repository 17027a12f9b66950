"""Rendered page images kept for display and downstream RAG: content-addressed files under the data folder.

    pages/ab/ab12...ef.png          the page as rendered (PNG, lossless)
    pages/ab/ab12...ef.thumb.jpg    a thumbnail, at most 256 px on its longer side

A file's name is the SHA-256 of the page's pixels, so the same page is stored once however often it is
ingested, and a write is atomic (temporary file, then rename): a crash never leaves half a file behind.
"""

from __future__ import annotations

import errno
import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from ._errors import DiskFullError, NotFoundError, PageStoreError
from ._fileio import atomic_writer, check_free_space

__all__ = ["PageStore", "StoredPage"]

THUMBNAIL_SIDE = 256


@dataclass(frozen=True)
class StoredPage:
    """Where a page image and its thumbnail were stored, relative to the page store's root."""

    image: str
    thumbnail: str


class PageStore:
    """A folder of page images addressed by content."""

    def __init__(self, root: Path, *, reserve: int = 0) -> None:
        """A page store in ``root``, keeping ``reserve`` bytes free on its disk (see DiskFullError)."""
        self.root = root
        self.reserve = reserve

    def put(self, image: Image.Image) -> StoredPage:
        """Store ``image`` (and its thumbnail) unless already there; return their relative paths."""
        digest = hashlib.sha256(image.tobytes()).hexdigest()
        digest = hashlib.sha256(f"{image.mode}{image.size}{digest}".encode()).hexdigest()
        rel = Path(digest[:2]) / digest
        page, thumb = rel.with_suffix(".png"), Path(f"{rel}.thumb.jpg")
        check_free_space(self.root, 3 * image.width * image.height, self.reserve, "a page image")
        try:
            if not (self.root / page).is_file():
                self._write(self.root / page, image, "PNG", optimize=False, compress_level=3)
            if not (self.root / thumb).is_file():
                small = image.copy()
                small.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE), Image.Resampling.LANCZOS)
                self._write(self.root / thumb, small, "JPEG", quality=85)
        except OSError as e:
            if e.errno == errno.ENOSPC:
                free = shutil.disk_usage(self.root).free
                raise DiskFullError(
                    f"the disk of the page store {self.root} is full ({free} bytes free); everything written "
                    "before is kept. Free some space and run the same command again.",
                    path=str(self.root),
                    needed=3 * image.width * image.height,
                    free=free,
                ) from None
            raise PageStoreError(f"cannot write to the page store {self.root}: {e.strerror or e}") from None
        return StoredPage(image=page.as_posix(), thumbnail=thumb.as_posix())

    def path(self, relative: str) -> Path:
        """The file behind a relative path from a payload; :class:`NotFoundError` for anything outside
        the store or missing from it."""
        p = (self.root / relative).resolve()
        if self.root.resolve() not in p.parents:
            raise NotFoundError(f"{relative!r} is not a page store path")
        if not p.is_file():
            raise NotFoundError(f"{relative!r} is missing from the page store {self.root}")
        return p

    @staticmethod
    def _write(path: Path, image: Image.Image, fmt: str, **options: object) -> None:
        with atomic_writer(path) as f:
            image.save(f, fmt, **options)
