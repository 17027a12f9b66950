"""The primitives a store backend implements (the embedded engine, a Qdrant server): a small protocol, as
httpx keeps a transport to ``handle_request`` and ``close``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .._text._terms import SparseVector
from ._points import Filter, Fusion, Point, Record, ScoredPoint, Scroll, Visual

__all__ = ["Backend"]


class Backend(Protocol):
    """The primitives a store backend implements; :class:`Store` calls them with checked arguments only.

    Each raises :class:`StoreError` (or a subclass) on failure, translated from its library's errors; a
    collection that does not exist is :class:`CollectionNotFoundError`.
    """

    #: where the collections live, for messages: a folder or a URL
    where: str
    #: whether every operation accepts an alias in place of a collection (a Qdrant server does; the
    #: embedded store has no aliases of its own, so the core resolves them before calling it)
    resolves_aliases: bool

    def collection_dim(self, name: str) -> int | None:
        """The dim of collection ``name``'s vector, ``None`` when the collection does not exist."""
        ...

    def create_collection(self, name: str, dim: int, tokens: int | None = None, text: bool = False) -> None:
        """Create collection ``name``: cosine vector ``LAYOUT.vector`` of ``dim`` (float16, an int8 copy),
        keyword indexes on ``LAYOUT.indexed_fields``; with ``tokens``, also the multi-vector
        ``LAYOUT.tokens`` of that dim (MaxSim); with ``text``, the sparse vector ``LAYOUT.text`` (IDF
        modifier). Creating one that another client made meanwhile, with the same dim, is not an error."""
        ...

    def has_text(self, name: str) -> bool:
        """Whether collection ``name`` has the sparse vector ``LAYOUT.text``."""
        ...

    def token_dim(self, name: str) -> int | None:
        """The dim of collection ``name``'s token vectors, ``None`` when it is single-vector."""
        ...

    def collections(self) -> list[str]:
        """Names of the existing collections (any order), aliases not included."""
        ...

    def drop_collection(self, name: str) -> None:
        """Delete collection ``name`` and its points (not an error when it does not exist)."""
        ...

    def aliases(self) -> dict[str, str]:
        """Every alias and the collection it points at."""
        ...

    def set_alias(self, alias: str, collection: str) -> None:
        """Point ``alias`` at ``collection`` in one atomic step (creating the alias, or switching it): a
        reader sees the old target or the new one, never neither. A collection named ``alias`` (made
        before versions) is dropped first where aliases and collections share one namespace."""
        ...

    def read_record(self, name: str) -> dict[str, Any] | None:
        """docvec's record of collection ``name`` (see :meth:`Store.record`), ``None`` when it has none."""
        ...

    def advertise(self, fields: dict[str, Any]) -> None:
        """Tell other processes that find the store held by this one ``fields`` (where it serves)."""
        ...

    def write_record(self, name: str, record: dict[str, Any]) -> None:
        """Replace docvec's record of collection ``name``, durably."""
        ...

    def upsert(self, name: str, points: Sequence[Point]) -> None:
        """Write one batch of points (acknowledged, or in the write-ahead log, on return)."""
        ...

    def delete(self, name: str, ids: Sequence[str]) -> None:
        """Delete one batch of points by canonical id; unknown ids are ignored."""
        ...

    def delete_where(self, name: str, flt: Filter) -> None:
        """Delete every point matching a non-empty ``flt``."""
        ...

    def set_payload(self, name: str, flt: Filter, payload: dict[str, Any]) -> None:
        """Set the fields of ``payload`` on every point matching a non-empty ``flt`` (others unchanged)."""
        ...

    def scroll(self, name: str, page: Scroll, offset: Any) -> tuple[list[Record], Any]:
        """One ``page`` of records from ``offset`` (``None``: the start), and the next page's offset
        (``None`` after the last)."""
        ...

    def count(self, name: str, flt: Filter | None) -> int:
        """Exact number of matching points."""
        ...

    def facet(self, name: str, field: str, limit: int) -> dict[str, int]:
        """Up to ``limit`` values of the indexed payload ``field``, each with its (non-zero) point count."""
        ...

    def search(self, name: str, visual: Visual, k: int, flt: Filter | None) -> list[ScoredPoint]:
        """The ``k`` best points for ``visual``, best first, among those matching ``flt``, in one query: by
        cosine to its vector; by MaxSim of its tokens over every point; or, with its ``prefetch`` N, by
        MaxSim over the N best points for its vector."""
        ...

    def search_text(
        self, name: str, terms: SparseVector, k: int, flt: Filter | None, fusion: Fusion | None
    ) -> list[ScoredPoint]:
        """The ``k`` best points among those matching ``flt``, best first: by keyword score (``terms`` on
        ``LAYOUT.text``, IDF applied by the store); with ``fusion``, by weighted reciprocal rank fusion (k
        ``LAYOUT.rrf_k``, weights 1 and its weight) of its depth's best by its visual query and by keyword
        score, in one query."""
        ...

    def optimize(self, name: str) -> bool:
        """Bring search structures up to date with recent writes; whether anything changed."""
        ...

    def flush(self) -> None:
        """Make every acknowledged write durable."""
        ...

    def close(self) -> None:
        """Release the backend (called once)."""
        ...
