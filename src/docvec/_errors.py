"""docvec's exception tree: every error docvec raises on purpose, in one place.

Errors from backends (ctypes return codes, PIL, PDFium, the GGUF reader, huggingface_hub, qdrant-edge,
qdrant-client, subprocesses) are translated where they enter, so callers never need to know a backend's
exception types. A message names the input (file, item, collection, URL) and says why. An error keeps its
class across the REST API: the server's error body names it (:func:`error_fields`), and
:class:`docvec.RemoteIndex` raises it again with the same message (:func:`rebuild_error`)::

    DocvecError
    ├── ConfigError                settings that cannot work (bad dim, bad pixel bounds, ...)
    │   └── CollectionMismatchError    a collection whose vectors another model or other settings made
    ├── ModelError                 a model that cannot be found or loaded
    │   ├── ModelNotFoundError         a path or registry name that points at nothing usable
    │   ├── ModelFileError             a missing, corrupt or wrong-kind GGUF file (names the file)
    │   └── ModelMismatchError         model files that do not belong together, or to any profile
    ├── BackendError               llama.cpp is missing, or one of its calls failed
    ├── ToolError                  a conversion, quantization or download step failed
    │   └── CheckpointError            a checkpoint file not as docvec expects (names the file)
    │       └── TaskNotFoundError          the head's LoRA has no factors for the task asked for
    ├── InputError                 a text, image, query, filter or tag that cannot be used (names it)
    │   ├── ConflictError              what the collection's state refuses (dropping the live version, ...)
    │   └── TooLargeError              an input over its size limit (an upload, a request body)
    ├── RenderError                a document that cannot be rendered (names the file and the reason)
    ├── RendererStartError         the render worker processes cannot start (the run stops)
    ├── RendererStateError         a renderer used after close(), or for two documents at once
    ├── IngestError                a document that could not be indexed (``failures`` says why)
    ├── ForbiddenError             a request without the server's key, or for an operator's endpoint from afar
    ├── UnsupportedError           a verb a docvec server does not offer (a RemoteIndex cannot do it)
    ├── NotFoundError              an unknown document, page, or page-store file
    ├── PageStoreError             the page store cannot be written
    └── StoreError                 a vector store operation failed (names the collection)
        ├── CollectionNotFoundError    the collection does not exist
        ├── DiskFullError              too little free space on the data folder's disk (names it, how much)
        ├── ForeignCollectionError     a collection on a Qdrant server that docvec did not make
        ├── StoreBusyError             the embedded store's folder is held by another process (names it)
        └── StoreUnavailableError      a Qdrant server kept failing or could not be reached (names the URL)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "BackendError",
    "CheckpointError",
    "CollectionMismatchError",
    "CollectionNotFoundError",
    "ConfigError",
    "ConflictError",
    "DiskFullError",
    "DocvecError",
    "ForbiddenError",
    "ForeignCollectionError",
    "IngestError",
    "InputError",
    "ModelError",
    "ModelFileError",
    "ModelMismatchError",
    "ModelNotFoundError",
    "NotFoundError",
    "PageStoreError",
    "RenderError",
    "RendererStartError",
    "RendererStateError",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "TaskNotFoundError",
    "TooLargeError",
    "ToolError",
    "UnsupportedError",
    "error_fields",
    "rebuild_error",
]


class DocvecError(Exception):
    """Base class of every error docvec raises on purpose."""


class _AboutAFile(Exception):
    """Mixin of the errors about one file: ``path`` and ``reason`` are kept, the message is both."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class ConfigError(DocvecError):
    """A setting has a value docvec cannot work with."""


class CollectionMismatchError(ConfigError):
    """A collection holds vectors that another model, vector size or page budget made: searching it, or
    adding to it, with these settings would mix two kinds of vectors (the message names both)."""


class ModelError(DocvecError):
    """A model cannot be found or loaded."""


class ModelNotFoundError(ModelError):
    """A model path or registry name points at nothing usable."""


class ModelFileError(_AboutAFile, ModelError):
    """A model file is missing, unreadable, corrupt, or of the wrong kind."""


class ModelMismatchError(ModelError):
    """The model files do not belong together (an mmproj of another language model), or no model profile
    serves them."""


class BackendError(DocvecError):
    """llama.cpp is not installed, or one of its calls failed."""


class ToolError(DocvecError):
    """A conversion, quantization or download step failed."""


class CheckpointError(ToolError):
    """A checkpoint file (safetensors, an adapter's config) that is not as docvec expects; the message
    names the file. Conversion and pulling say what to do about it."""


class TaskNotFoundError(CheckpointError):
    """The multi-vector head's LoRA has no factors for the task asked for (the message lists those it
    has)."""


class InputError(DocvecError):
    """An input cannot be used.

    ``index`` is the position of the bad item in the batch it came in (``None`` for a single item),
    ``item`` a short description of it (a path, or the start of a text).
    """

    def __init__(self, reason: str, *, index: int | None = None, item: str | None = None) -> None:
        self.reason = reason
        self.index = index
        self.item = item
        where = []
        if index is not None:
            where.append(f"item {index}")
        if item is not None:
            where.append(item)
        prefix = f"{' '.join(where)}: " if where else ""
        super().__init__(prefix + reason)


class ConflictError(InputError):
    """A request the collection's present state cannot take: dropping its live version, a multi-vector
    search of a single-vector collection. The same request can succeed once the state changes."""


class TooLargeError(InputError):
    """An input (an upload, a request body) over its size limit."""


class RenderError(_AboutAFile, DocvecError):
    """A whole document cannot be rendered; ``reason`` says why, the message names the file."""


class RendererStartError(DocvecError):
    """The render worker processes cannot start (out of processes or memory, a broken environment): every
    document would fail the same way, so the run stops with this error instead."""


class RendererStateError(DocvecError):
    """A renderer was used after ``close()``, or asked for a second document while one is streaming."""


class IngestError(DocvecError):
    """A document could not be indexed; ``failures`` holds the reasons (file, page, reason)."""

    def __init__(self, message: str, failures: Sequence[dict[str, Any]]) -> None:
        self.failures = list(failures)
        super().__init__(message)


class ForbiddenError(DocvecError):
    """A request a docvec server does not take from this client: without the server's API key (a missing or
    wrong ``X-API-Key``), or an operator's endpoint (they name the server's files) from another machine
    while the server has no API key."""


class UnsupportedError(DocvecError):
    """A verb of :class:`docvec.Index` that a docvec server does not offer over its API, asked of a
    :class:`docvec.RemoteIndex` (the message says what to do instead)."""


class NotFoundError(DocvecError):
    """An unknown document or page, or a page-store file that is not there."""


class PageStoreError(DocvecError):
    """The page store (rendered page images and thumbnails) cannot be written."""


class StoreError(DocvecError):
    """A vector store operation failed; the message names the collection where there is one.

    ``partial`` is what an ingest run had done when this error stopped it (an ``IngestReport``: what it
    wrote is kept), or ``None``.
    """

    partial: Any = None


class CollectionNotFoundError(StoreError):
    """The collection does not exist (nothing was indexed into it yet)."""


class ForeignCollectionError(StoreError):
    """A collection docvec did not make (no ``page`` vector, or not cosine), on a shared Qdrant server."""


class DiskFullError(StoreError):
    """The disk under docvec's data folder has too little free space for a write (or to open a collection,
    whose files take room as they are mapped); ``path``, ``needed`` and ``free`` (bytes) say where and how
    much (``needed`` is 0 when the disk filled up under a write, which the store does not size)."""

    def __init__(self, message: str, *, path: str, needed: int, free: int) -> None:
        self.path = path
        self.needed = needed
        self.free = free
        super().__init__(message)


class StoreBusyError(StoreError):
    """The embedded store's folder is held by another process (or another handle in this one).

    ``owner`` is what that process recorded about itself when it opened the store (pid, hostname, start
    time, command line), or ``None`` when it left no readable record.
    """

    def __init__(self, message: str, *, path: str, owner: dict[str, Any] | None = None) -> None:
        self.path = path
        self.owner = owner
        super().__init__(message)


class StoreUnavailableError(StoreError):
    """A Qdrant server could not be reached, or kept failing, after all retries."""

    def __init__(self, message: str, *, url: str, attempts: int) -> None:
        self.url = url
        self.attempts = attempts
        super().__init__(message)


# -- errors across a process boundary (the REST API) ------------------------------------------------------

#: what each kind of error carries besides its message, with the value a rebuilt one gets when the server
#: did not send it (``failures`` travel as the error body's ``errors``; a busy store's ``owner`` stays on
#: the server, which names it in the message)
_ATTRIBUTES: dict[type[Exception], dict[str, Any]] = {
    _AboutAFile: {"path": "", "reason": ""},
    InputError: {"reason": "", "index": None, "item": None},
    IngestError: {"failures": []},
    DiskFullError: {"path": "", "needed": 0, "free": 0},
    StoreBusyError: {"path": "", "owner": None},
    StoreUnavailableError: {"url": "", "attempts": 1},
}


def _classes(root: type[DocvecError]) -> dict[str, type[DocvecError]]:
    found = {root.__name__: root}
    for sub in root.__subclasses__():
        found |= _classes(sub)
    return found


def error_fields(exc: DocvecError) -> dict[str, Any]:
    """What ``exc`` carries besides its message and failures, JSON-able, for a client to rebuild it."""
    out: dict[str, Any] = {}
    for kind, attributes in _ATTRIBUTES.items():
        if isinstance(exc, kind):
            out |= {a: getattr(exc, a) for a in attributes if a not in ("failures", "owner")}
    return out


def rebuild_error(
    name: str, message: str, fields: Mapping[str, Any] | None = None, failures: Sequence[Any] | None = None
) -> DocvecError:
    """The docvec error class ``name`` (a plain :class:`DocvecError` for a name this docvec does not know)
    with ``message``, its ``fields`` and ``failures`` as a server sent them: what the server raised, raised
    again here, with the same message."""
    cls = _classes(DocvecError).get(name, DocvecError)
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    given = dict(fields or {}) | {"failures": list(failures or [])}
    for kind, attributes in _ATTRIBUTES.items():
        if issubclass(cls, kind):
            for attribute, default in attributes.items():
                setattr(exc, attribute, given.get(attribute, default))
    return exc
