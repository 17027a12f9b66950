"""The store: where page vectors and their payloads are kept (:class:`Store`, in front of two small Qdrant
backends), and the rendered page images (:class:`PageStore`, a content-addressed folder).

- :class:`EdgeBackend` (the default): Qdrant's engine embedded in this process through qdrant-edge-py; a
  folder, one process at a time (:mod:`._owner`: the folder's lock and the record of who holds it).
- :class:`RemoteBackend`: a Qdrant server or cluster through qdrant-client.

What a collection looks like (:mod:`._layout`), the points and filters every operation takes
(:mod:`._points`), and the primitives a backend implements (:mod:`._backend`) are shared by both.

:func:`open_store` picks one from settings. Each backend module is imported only when used, so a user of
the embedded store never imports qdrant-client and the reverse; a missing package is a
:class:`~docvec.StoreError` that says what to install.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import StoreError
from ._backend import Backend
from ._core import VERSION_RE, Store
from ._layout import LAYOUT
from ._owner import read_owner_token
from ._pages import PageStore, StoredPage
from ._points import Dense, Filter, Fused, Hybrid, Keywords, MaxSim, Point, ScoredPoint, StoreQuery, point_id

if TYPE_CHECKING:
    from ._edge import EdgeBackend
    from ._remote import RemoteBackend

__all__ = [
    "LAYOUT",
    "VERSION_RE",
    "Backend",
    "Dense",
    "EdgeBackend",
    "Filter",
    "Fused",
    "Hybrid",
    "Keywords",
    "MaxSim",
    "PageStore",
    "Point",
    "RemoteBackend",
    "ScoredPoint",
    "Store",
    "StoreQuery",
    "StoredPage",
    "open_store",
    "point_id",
    "read_owner_token",
]

log = logging.getLogger("docvec")

# name -> (module, what it is, how to install the package it needs)
_BACKENDS = {
    "EdgeBackend": ("docvec._store._edge", "the embedded store", "pip install qdrant-edge-py==0.9.0"),
    "RemoteBackend": ("docvec._store._remote", "a Qdrant server", "pip install 'docvec[server]'"),
}


def _backend(name: str) -> Any:
    module, what, hint = _BACKENDS[name]
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:  # the backend's package is not installed
        raise StoreError(f"{what} needs the {exc.name or 'missing'} package: {hint}") from exc
    return getattr(mod, name)


def __getattr__(name: str) -> Any:
    # Lazy exports: `from docvec._store import EdgeBackend` imports qdrant-edge only then.
    if name in _BACKENDS:
        return _backend(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(
    *,
    path: Path | None = None,
    url: str | None = None,
    api_key: str | None = None,
    reserve: int = 0,
    create: bool = True,
) -> Store:
    """Open the store settings ask for: a Qdrant server at ``url`` if given, else the embedded store in
    the folder ``path``, keeping ``reserve`` bytes free on its disk; with ``create=False`` a folder that
    is not there is made only by the first write.

    Raises :class:`StoreError` when neither is given or the backend's package is missing (with the
    command that installs it), and :class:`~docvec.StoreBusyError` when another process holds ``path``.
    """
    if url:
        return Store(_backend("RemoteBackend")(url, api_key=api_key))
    if path is None:
        raise StoreError(
            "no store configured: give a store folder (path) or a Qdrant URL (DOCVEC_QDRANT_URL)"
        )
    if api_key:
        # Not an error: a key left in the environment should not stop the embedded store from opening.
        log.warning("a Qdrant API key is set but no URL: using the embedded store at %s", path)
    return Store(_backend("EdgeBackend")(Path(path), reserve=reserve, create=create))
