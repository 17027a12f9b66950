"""What the store holds and hands back: points (a dense vector, token vectors, a payload), their
deterministic ids, search hits, and the filter every operation takes."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from .._errors import StoreError
from .._text._terms import SparseVector

__all__ = [
    "Dense",
    "Filter",
    "Fused",
    "Fusion",
    "Hybrid",
    "Keywords",
    "MaxSim",
    "Point",
    "Record",
    "ScoredPoint",
    "Scroll",
    "StoreQuery",
    "Visual",
    "canonical_id",
    "check_terms",
    "point_id",
    "token_array",
]

# Fixed namespace for point_id(): changing it would change every id and break idempotent re-indexing.
_ID_NAMESPACE = uuid.UUID("5f0e6a52-3c1b-4d0e-9d3a-7c2f1b9e8a41")


def point_id(*parts: str | int) -> str:
    """A deterministic UUID string for a point, from the parts that identify it (e.g. doc id and page).

    Writing the same page twice then overwrites one point instead of adding a duplicate.
    """
    if not parts:
        raise StoreError("point_id needs at least one part")
    # \x1f (unit separator) keeps ("a", "bc") and ("ab", "c") apart.
    return str(uuid.uuid5(_ID_NAMESPACE, "\x1f".join(str(p) for p in parts)))


def canonical_id(value: object) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise StoreError(f"point id {value!r} is not a UUID string (see docvec._store.point_id)") from None


@dataclass(frozen=True)
class Point:
    """One stored vector: a UUID string id, a 1-D float32 vector and a JSON-able payload.

    The id is normalised to the canonical lowercase hyphenated form (the one the stores give back) and the
    vector to a 1-D float32 array; anything else raises :class:`StoreError`.
    """

    id: str
    vector: npt.NDArray[np.float32]
    payload: dict[str, Any]
    #: a multi-vector collection's token vectors: [tokens, token dim]
    tokens: npt.NDArray[np.float32] | None = None
    #: a collection with text: the page text's terms (none for a page without text)
    terms: SparseVector | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", canonical_id(self.id))
        vec = np.asarray(self.vector, dtype=np.float32)
        if vec.ndim != 1 or vec.size == 0:
            raise StoreError(f"point {self.id}: vector must be 1-D and non-empty, got shape {vec.shape}")
        if not np.isfinite(vec).all():
            raise StoreError(f"point {self.id}: vector has NaN or infinite values")
        object.__setattr__(self, "vector", vec)
        if self.tokens is not None:
            object.__setattr__(self, "tokens", token_array(f"point {self.id}", self.tokens))
        if not isinstance(self.payload, dict):
            raise StoreError(f"point {self.id}: payload must be a dict, got {type(self.payload).__name__}")
        if self.terms is not None:
            check_terms(f"point {self.id}", self.terms)


@dataclass(frozen=True)
class ScoredPoint:
    """A search result: point id, cosine similarity (higher is closer) and the point's payload."""

    id: str
    score: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class Record:
    """A stored point as a backend reads it back: its named vectors only when they were asked for."""

    id: str
    payload: dict[str, Any]
    vectors: dict[str, Any] | None = None


@dataclass(frozen=True)
class Scroll:
    """What each page of a scroll asks for: up to ``limit`` records matching ``flt``, with the named
    ``vectors`` (none when empty) and their payloads less the fields ``without``."""

    flt: Filter | None
    limit: int
    vectors: tuple[str, ...] = ()
    without: tuple[str, ...] = ()


@dataclass(frozen=True)
class Visual:
    """The visual half of a search (see :meth:`docvec._store.Store.search`): the dense ``vector``, the
    query's ``tokens`` (MaxSim over every page), or both with ``prefetch`` N (the dense vector's best N
    pages reranked by MaxSim)."""

    vector: npt.NDArray[np.float32] | None = None
    tokens: npt.NDArray[np.float32] | None = None
    prefetch: int | None = None


@dataclass(frozen=True)
class Fusion:
    """What a fused search adds to its keyword ranking, as the backends take it: the ``visual`` ranking's
    best ``depth`` points, and the keyword ranking's weight against the visual one's 1."""

    visual: Visual
    depth: int
    weight: float


@dataclass(frozen=True)
class Dense:
    """Score points by cosine similarity to a dense ``vector``."""

    vector: npt.ArrayLike


@dataclass(frozen=True)
class MaxSim:
    """Score every point by MaxSim of the query's token vectors over its own (a multi-vector collection)."""

    tokens: npt.ArrayLike


@dataclass(frozen=True)
class Hybrid:
    """The ``prefetch`` points most similar to the dense ``vector``, reranked by MaxSim of ``tokens``
    (one query)."""

    vector: npt.ArrayLike
    tokens: npt.ArrayLike
    prefetch: int


@dataclass(frozen=True)
class Keywords:
    """Score points by the query's ``terms`` in their text: BM25 with the store's IDF (a collection with
    text)."""

    terms: SparseVector


@dataclass(frozen=True)
class Fused:
    """A ``visual`` ranking and a keyword one fused by reciprocal rank fusion: each ranking's best ``depth``
    points, the keyword ranking weighted ``weight`` against the visual one's 1 (Qdrant's weighted RRF: a
    weight divides the ranking's positions), in one query. A point found by one ranking only counts."""

    visual: Dense | MaxSim | Hybrid
    keywords: Keywords
    depth: int = 100
    weight: float = 1.0


#: What a search asks of the store: one value, its kind its meaning (:meth:`docvec._store.Store.search`).
StoreQuery = Dense | MaxSim | Hybrid | Keywords | Fused


def check_terms(what: str, terms: SparseVector) -> SparseVector:
    """``terms`` if it is a valid sparse vector (unique unsigned 32-bit indices, finite weights, as many
    of each), else :class:`StoreError`."""
    if not isinstance(terms, SparseVector):
        raise StoreError(f"{what}: terms must be a SparseVector, got {type(terms).__name__}")
    if len(terms.indices) != len(terms.values):
        raise StoreError(f"{what}: terms have {len(terms.indices)} indices and {len(terms.values)} values")
    if len(set(terms.indices)) != len(terms.indices):
        raise StoreError(f"{what}: terms have repeated indices")
    if any(not 0 <= i < 2**32 for i in terms.indices):
        raise StoreError(f"{what}: term indices must be unsigned 32-bit integers")
    if not all(np.isfinite(terms.values)):
        raise StoreError(f"{what}: term weights have NaN or infinite values")
    return terms


def token_array(what: str, tokens: npt.ArrayLike) -> npt.NDArray[np.float32]:
    arr = np.asarray(tokens, dtype=np.float32)
    if arr.ndim != 2 or arr.size == 0:
        raise StoreError(
            f"{what}: token vectors must be 2-D [tokens, dim] and non-empty, got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        raise StoreError(f"{what}: token vectors have NaN or infinite values")
    return arr


def _as_tuple(field: str, value: object) -> tuple[str, ...]:
    # A bare string would otherwise be split into characters by tuple().
    if isinstance(value, str):
        return (value,)
    items = tuple(cast(Iterable[Any], value))
    for item in items:
        if not isinstance(item, str):
            raise StoreError(f"Filter.{field}: expected strings, got {item!r}")
    return items


@dataclass(frozen=True)
class Filter:
    """Which points an operation applies to.

    Every non-empty field must hold; within a field any listed value matches. ``doc_ids`` matches the
    payload field ``doc_id``, ``sources`` matches ``source`` and ``tags`` (``"key=value"`` strings) matches
    any element of the list ``tags``, ``images`` the page store path ``image``. ``finished`` leaves out
    the pages of documents still being written (payload ``state`` ``"writing"``; see the ingest stage).
    An empty filter matches every point.
    """

    doc_ids: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    finished: bool = False
    images: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for field in ("doc_ids", "sources", "tags", "images"):
            object.__setattr__(self, field, _as_tuple(field, getattr(self, field)))

    @property
    def is_empty(self) -> bool:
        """True when the filter names no points (an operation on it would take every finished one)."""
        return not (self.doc_ids or self.sources or self.tags or self.images)

    def conditions(self) -> list[tuple[str, tuple[str, ...]]]:
        """The (payload field, accepted values) pairs that must all hold; backends build their filter
        from these (a keyword match of any of the values)."""
        pairs = [
            ("doc_id", self.doc_ids),
            ("source", self.sources),
            ("tags", self.tags),
            ("image", self.images),
        ]
        return [(key, values) for key, values in pairs if values]

    def exclusions(self) -> list[tuple[str, tuple[str, ...]]]:
        """The (payload field, values) pairs no point may have (a keyword match of any of the values)."""
        return [("state", ("writing",))] if self.finished else []
