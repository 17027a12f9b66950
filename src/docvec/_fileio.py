"""Atomic file writes (a crash leaves either the old file or the new one, never half of one), and the check
that a disk has room for a write."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from ._errors import DiskFullError

__all__ = [
    "MB",
    "atomic_writer",
    "check_free_space",
    "disk_free",
    "fsync_dir",
    "unallocated",
    "write_atomic",
    "write_json_atomic",
]

MB = 1024 * 1024


def check_free_space(folder: Path, needed: int, reserve: int, what: str) -> None:
    """Raise :class:`DiskFullError` unless ``folder``'s disk has ``needed`` bytes free for ``what`` and
    still ``reserve`` bytes after it. ``folder`` may not exist yet: its nearest existing parent is asked."""
    free = disk_free(folder)
    if free - needed < reserve:
        kept = f", and docvec keeps {_mb(reserve)} free (DOCVEC_STORE_RESERVE_MB)" if reserve else ""
        raise DiskFullError(
            f"not enough free space in {folder} for {what}: it needs about {_mb(needed)}, {_mb(free)} is "
            f"free{kept}; everything written before is kept. Free some space and run the same command "
            "again.",
            path=str(folder),
            needed=needed,
            free=free,
        )


def disk_free(folder: Path) -> int:
    """The bytes free on ``folder``'s disk (for this user); a folder that does not exist yet is asked
    through its nearest existing parent."""
    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def unallocated(folder: Path) -> int:
    """The bytes of the files under ``folder`` that take no room on the disk yet (sparse files' holes),
    whatever the file system; 0 where the platform does not say how much a file takes."""
    total = 0
    for path in Path(folder).rglob("*"):
        try:
            st = path.lstat()
        except OSError:
            continue  # removed while we looked: it takes nothing
        blocks = getattr(st, "st_blocks", None)
        if blocks is not None and stat.S_ISREG(st.st_mode):
            total += max(0, st.st_size - 512 * blocks)
    return total


def _mb(n: int) -> str:
    return f"{n / MB:.1f} MB" if n < 10 * MB else f"{n // MB} MB"


@contextmanager
def atomic_writer(path: Path, *, durable: bool = False) -> Iterator[IO[bytes]]:
    """A binary file that replaces ``path`` when the block ends without an error.

    The data goes to a temporary file beside ``path`` (same file system, so the rename is atomic) that is
    removed if anything fails. ``durable`` also syncs it to disk before the rename, for records whose loss
    after a power cut would matter (a store's own metadata); caches and page images skip that cost.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)  # the rename itself survives a power cut only once the folder is synced


def fsync_dir(folder: Path) -> None:
    """Sync a folder's entries (a rename or an unlink in it) to disk, where the platform allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # no folder, or a platform that cannot open one (Windows): nothing more can be done
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a folder; the rename is as safe as they make it
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path, durable=durable) as f:
        f.write(data)


def write_json_atomic(path: Path, data: Any, *, durable: bool = False) -> None:
    """Replace ``path`` with ``data`` as indented UTF-8 JSON, atomically."""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    write_atomic(path, text.encode("utf-8"), durable=durable)
