"""The parts a stage that writes pages works with, in one bundle."""

from __future__ import annotations

from dataclasses import dataclass

from .._model import Embedder
from .._render import Renderer
from .._store import PageStore, Store

__all__ = ["Parts"]


@dataclass(frozen=True)
class Parts:
    """The store, the page store (rendered images), a renderer and the model; the renderer renders at the
    model's pixel budget (``embedder.bounds.max_pixels``)."""

    store: Store
    pages: PageStore
    renderer: Renderer
    embedder: Embedder
