"""Source documents: which files an ingest run reads, what each one is, and uploaded bytes kept as files.

The identity rule lives here: a document's id is the first 32 hex digits of its file's SHA-256, so an
unchanged file is recognised without rendering or embedding it, and the same bytes under two names are
one document.
"""

from __future__ import annotations

import glob
import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from PIL import Image

from .._errors import RenderError, TooLargeError
from .._fileio import check_free_space
from .._records import IngestFailure
from .._render._renderer import READS_JPEG2000, DocumentKind, detect_kind

__all__ = [
    "DOCUMENT_SUFFIXES",
    "Discovered",
    "SourceDocument",
    "discover",
    "document_id",
    "identify",
    "missing_reason",
    "save_upload",
    "sha256_of",
]

#: Files found in folders are considered only with these suffixes (the others are reported as ignored);
#: named files are always tried, and their kind is decided by content.
DOCUMENT_SUFFIXES = frozenset(
    {".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp", ".gif"}
    | ({".jp2", ".j2k", ".jpx", ".jpf"} if READS_JPEG2000 else set())
)
_NOT_A_DOCUMENT = "not a document (neither a PDF nor an image)"
# one reason for an empty file, whether it is read from a folder or uploaded
_EMPTY = "the file is empty"


@dataclass(frozen=True)
class SourceDocument:
    """A file to index, identified: its id, content hash and kind; the page count once it is opened."""

    path: Path
    doc_id: str
    sha256: str
    kind: DocumentKind
    name: str  # what to call it: the file's name, or an upload's original name
    page_count: int = 0  # 0 until the renderer has opened it


def document_id(sha256: str) -> str:
    """A document's id from its file's SHA-256 (hex)."""
    return sha256[:32]


@dataclass(frozen=True)
class Discovered:
    """What :func:`discover` found: the files to ingest, the names that name nothing (as failures), the
    files in the folders that docvec does not read (by their names: ``.docx``, ``.xps``, ...), and the
    folders and patterns given that hold no document (``empty``: nothing to do there, which is no failure)."""

    files: list[Path]
    failures: list[IngestFailure]
    ignored: list[Path]
    empty: list[str]


def missing_reason(path: Path) -> str | None:
    """Why ``path`` names nothing that can be read (``"no such file or folder"``, ``"file name too long"``,
    ...), or ``None`` when it is there."""
    try:
        path.stat()
    except FileNotFoundError:
        return "no such file or folder"
    except OSError as e:  # a name too long for the file system, a folder that cannot be entered, ...
        return (e.strerror or type(e).__name__).lower()
    except ValueError:  # what the operating system cannot be asked about
        return "not a file name (it has a NUL character)"
    return None


def within_roots(path: str | Path, roots: Sequence[Path]) -> bool:
    """Whether ``path`` (for a glob pattern, its part before the first wildcard) lies under one of the
    folders ``roots`` once its links are resolved: decided from the name and the links, the same way for a
    path that does not exist (an answer that says nothing of what is there). A relative path never does."""
    text = str(path)
    if "\0" in text or not os.path.isabs(text):
        return False
    parts = Path(text).parts
    fixed = []
    for part in parts:
        if any(c in part for c in "*?["):
            break
        fixed.append(part)
    real = Path(os.path.realpath(Path(*fixed) if fixed else "/"))
    return any(real == root or root in real.parents for root in roots)


def discover(paths: Sequence[str | Path], *, recursive: bool = True) -> Discovered:
    """The files to ingest: named files, folders (recursively) and glob patterns, each once, sorted;
    ``~`` stands for the home folder, as in a shell.

    A name that matches nothing is a failure record, not an exception: the rest of the run goes on.
    Hidden files in folders are passed over; other files docvec does not read are listed as ignored.
    """
    found: dict[Path, None] = {}
    ignored: dict[Path, None] = {}
    failures: list[IngestFailure] = []
    empty: list[str] = []
    for raw in paths:
        text = os.path.expanduser(str(raw))
        pattern = glob.has_magic(text)
        matches = [Path(m) for m in sorted(glob.glob(text, recursive=True))] if pattern else [Path(text)]
        if pattern and not matches:  # a pattern that matches nothing names nothing missing: it finds nothing
            empty.append(str(raw))
            continue
        reason = missing_reason(matches[0])
        if reason:
            failures.append(IngestFailure(path=str(raw), reason=reason))
            continue
        before = len(found)
        for m in matches:
            if m.is_dir():
                walker = m.rglob("*") if recursive else m.glob("*")
                for f in sorted(walker):
                    if not f.is_file() or f.name.startswith("."):
                        continue
                    (found if f.suffix.lower() in DOCUMENT_SUFFIXES else ignored)[f.resolve()] = None
            elif m.is_file():
                found[m.resolve()] = None
        if len(found) == before and not any(m.is_file() for m in matches):
            empty.append(str(raw))  # a folder (or pattern) without a document in it
    return Discovered(sorted(found), failures, sorted(ignored), empty)


def identify(path: Path) -> SourceDocument:
    """Look at a file once: its kind by content and its SHA-256. :class:`RenderError` when it is no
    document or cannot be read."""
    kind = detect_kind(path)
    if kind is None:
        raise RenderError(path, _EMPTY if _is_empty(path) else _NOT_A_DOCUMENT)
    sha = sha256_of(path)
    return SourceDocument(path=path, doc_id=document_id(sha), sha256=sha, kind=kind, name=path.name)


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def sha256_of(path: Path) -> str:
    """The file's SHA-256 (hex); :class:`RenderError` when it cannot be read."""
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as e:
        raise RenderError(path, f"cannot read the file: {e.strerror or e}") from None
    return h.hexdigest()


def save_upload(
    stream: BinaryIO,
    folder: Path,
    *,
    limit: int,
    name: str | None = None,
    reserve: int = 0,
    stem: str | None = None,
) -> SourceDocument:
    """Stream an upload into ``folder`` as ``<stem>.<ext>`` (default stem: its SHA-256; the extension
    from its content) and identify it; nothing is kept when it is over ``limit`` bytes
    (:class:`TooLargeError`), empty or no document (:class:`RenderError`), or when its disk would keep less
    than ``reserve`` bytes free (:class:`~docvec.DiskFullError`). ``name`` (the client's file name) is the
    document's display name and the one its messages use: the server's own paths never appear in them.

    Named by its hash, the same bytes uploaded twice are one file: a second upload replaces the first with
    identical content.
    """
    shown = name or "the upload"
    folder.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    size = 0
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".upload-", delete=False) as tmp:
        tmp_path = Path(tmp.name)
        try:
            while block := stream.read(1 << 20):
                size += len(block)
                if size > limit:
                    raise TooLargeError(f"upload over {limit} bytes", item=shown)
                check_free_space(folder, len(block), reserve, f"the upload {shown}")
                h.update(block)
                tmp.write(block)
        except BaseException:
            tmp.close()
            tmp_path.unlink(missing_ok=True)
            raise
    try:
        if size == 0:
            raise RenderError(shown, _EMPTY)
        kind = detect_kind(tmp_path)
        ext = _extension(tmp_path, kind)
        if kind is None or ext is None:
            raise RenderError(shown, _NOT_A_DOCUMENT)
        sha = h.hexdigest()
        final = folder / f"{stem or sha}.{ext}"
        tmp_path.replace(final)
    finally:
        tmp_path.unlink(missing_ok=True)
    return SourceDocument(path=final, doc_id=document_id(sha), sha256=sha, kind=kind, name=name or final.name)


def _extension(path: Path, kind: DocumentKind | None) -> str | None:
    """The file's extension by content: ``pdf``, the image format, or ``None`` for no document."""
    if kind != "image":
        return "pdf" if kind == "pdf" else None
    try:
        with Image.open(path) as im:
            return str(im.format or "img").lower()
    except (OSError, ValueError, Image.DecompressionBombError):
        # A damaged or huge image still gets its render worker's verdict, with the reason the CLI gives.
        return "img"
