"""Rendered page images kept for display and downstream RAG: content-addressed files under the data folder.

    pages/ab/ab12...ef.png          the page as rendered (PNG, lossless)
    pages/ab/ab12...ef.thumb.jpg    a thumbnail, at most 256 px on its longer side

A file's name is the SHA-256 of the page's pixels, so the same page is stored once however often it is
ingested, and a write is atomic (temporary file, then rename): a crash never leaves half a file behind.
Every collection and version in a data folder shares the store; a file's modification time is when it was
last written or reused, which is what a collection of unused files (``docvec gc``) goes by.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from .._errors import DiskFullError, NotFoundError, PageStoreError
from .._fileio import atomic_writer, check_free_space

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
            if not _reuse(self.root / page):
                self._write(self.root / page, image, "PNG", optimize=False, compress_level=3)
            if not _reuse(self.root / thumb):
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

    def files(self) -> Iterator[tuple[str, float, int]]:
        """Every file in the store: its relative path, modification time and size."""
        if not self.root.is_dir():
            return
        for folder in sorted(self.root.iterdir()):
            if not folder.is_dir():
                continue
            for f in sorted(folder.iterdir()):
                try:
                    st = f.stat()
                except FileNotFoundError:  # removed meanwhile
                    continue
                yield f.relative_to(self.root).as_posix(), st.st_mtime, st.st_size

    def remove(self, relative: Iterable[str], *, before: float) -> tuple[int, int]:
        """Remove these files (relative paths) unless they were written or reused at ``before`` (a time
        stamp) or later; returns how many were removed and their bytes."""
        removed = freed = 0
        for rel in relative:
            path = self.root / rel
            try:
                st = path.stat()
                if st.st_mtime >= before:
                    continue
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError as e:
                raise PageStoreError(f"cannot remove {path}: {e.strerror or e}") from None
            removed += 1
            freed += st.st_size
        return removed, freed

    @staticmethod
    def thumbnail_of(image: str) -> str:
        """The relative path of the thumbnail stored with the page image ``image``."""
        return image.removesuffix(".png") + ".thumb.jpg"

    @staticmethod
    def _write(path: Path, image: Image.Image, fmt: str, **options: object) -> None:
        with atomic_writer(path) as f:
            image.save(f, fmt, **options)


def _reuse(path: Path) -> bool:
    """Whether ``path`` is there already; if so its modification time becomes now (it is in use again)."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    return True
