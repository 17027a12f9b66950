"""Vector stores for page embeddings: one small protocol, two Qdrant backends.

- :class:`EdgeStore` (the default): Qdrant's engine embedded in this process through qdrant-edge-py; a
  folder, one process at a time.
- :class:`RemoteStore`: a Qdrant server or cluster through qdrant-client.

:func:`open_store` picks one from settings. Each backend module is imported only when used, so a user of
the embedded store never imports qdrant-client and the reverse; a missing package is a
:class:`StoreError` that says what to install.

Errors::

    DocvecError
    └── StoreError                 a store operation failed (names the collection)
        ├── CollectionNotFoundError    the collection does not exist
        ├── StoreBusyError             the embedded store's folder is held by another process (names it)
        └── StoreUnavailableError      a Qdrant server kept failing or could not be reached (names the URL)
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import (
    CollectionNotFoundError,
    Filter,
    Hit,
    Point,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    VectorStore,
    point_id,
)

if TYPE_CHECKING:
    from .edge import EdgeStore
    from .remote import RemoteStore

__all__ = [
    "CollectionNotFoundError",
    "EdgeStore",
    "Filter",
    "Hit",
    "Point",
    "RemoteStore",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "VectorStore",
    "open_store",
    "point_id",
]

log = logging.getLogger("docvec")

# name -> (module, the package it needs, how to install it)
_BACKENDS = {
    "EdgeStore": ("docvec.store.edge", "qdrant_edge", "pip install qdrant-edge-py==0.9.0"),
    "RemoteStore": ("docvec.store.remote", "qdrant_client", "pip install 'docvec[server]'"),
}


def _backend(name: str) -> Any:
    module, package, hint = _BACKENDS[name]
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - the backend modules guard their own imports
        raise StoreError(f"{name} needs {package}: {hint}") from exc
    return getattr(mod, name)


def __getattr__(name: str) -> Any:
    # Lazy exports: `from docvec.store import EdgeStore` imports qdrant-edge only then.
    if name in _BACKENDS:
        return _backend(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(
    *, path: Path | None = None, url: str | None = None, api_key: str | None = None
) -> VectorStore:
    """Open the store settings ask for: a Qdrant server at ``url`` if given, else the embedded store in
    the folder ``path``.

    Raises :class:`StoreError` when neither is given or the backend's package is missing (with the
    command that installs it), and :class:`StoreBusyError` when another process holds ``path``.
    """
    if url:
        store: VectorStore = _backend("RemoteStore")(url, api_key=api_key)
        return store
    if path is None:
        raise StoreError(
            "no store configured: give a store folder (path) or a Qdrant URL (DOCVEC_QDRANT_URL)"
        )
    if api_key:
        # Not an error: a key left in the environment should not stop the embedded store from opening.
        log.warning("a Qdrant API key is set but no URL: using the embedded store at %s", path)
    store = _backend("EdgeStore")(Path(path))
    return store
