"""What every vector store backend speaks: points, hits, filters, the :class:`VectorStore` protocol and
the store's exceptions.

Backends (:mod:`docvec.store.edge`, :mod:`docvec.store.remote`) translate their library's types and errors
into these at their boundary, so callers never see a ``qdrant_edge`` or ``qdrant_client`` object.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Protocol, Self, cast, overload

import numpy as np
import numpy.typing as npt

from docvec.errors import DocvecError

__all__ = [
    "DATATYPE",
    "DISTANCE",
    "INDEXED_FIELDS",
    "OVERSAMPLING",
    "QUANTILE",
    "VECTOR_NAME",
    "CollectionNotFoundError",
    "Filter",
    "Hit",
    "Point",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "VectorStore",
    "check_collection_name",
    "point_id",
]

#: the one named dense vector of a docvec collection
VECTOR_NAME = "page"
#: distance of that vector; scores are cosine similarities in [-1, 1]
DISTANCE = "cosine"
#: how new collections store that vector: half of float32's memory and disk. The rounding (relative 2**-11
#: per component) moves a cosine score by under 1e-3, below the model's own bf16 noise.
DATATYPE = "float16"
#: New collections also keep an int8 copy of each vector in RAM (scalar quantization, this quantile of
#: values clipped): a search scans those, a quarter of the float32 bytes, takes the best
#: ``OVERSAMPLING * k``, and rescores them with the stored vectors, so the scores returned are exact.
#: benchmarks/bench_search.py measures the cost in recall@10 against an exact float32 scan: 1.000 at 10k
#: and 100k points with 2x oversampling, 0.94-0.95 without.
QUANTILE = 0.99
OVERSAMPLING = 2.0
#: payload fields filters use; both backends create a keyword index on each
INDEXED_FIELDS = ("doc_id", "source", "tags")

# Names become folder names in the embedded store, so keep them to a portable, path-safe alphabet;
# the remote store applies the same rule so that a collection can move between backends.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# Fixed namespace for point_id(): changing it would change every id and break idempotent re-indexing.
_ID_NAMESPACE = uuid.UUID("5f0e6a52-3c1b-4d0e-9d3a-7c2f1b9e8a41")


class StoreError(DocvecError):
    """A vector store operation failed; the message names the collection where there is one."""


class CollectionNotFoundError(StoreError):
    """The collection does not exist (create it with ``ensure_collection``)."""


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


def check_collection_name(name: str) -> str:
    """Return ``name`` if it is a valid collection name (letters, digits, ``_ . -``; up to 128), else raise
    :class:`StoreError`."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise StoreError(
            f"invalid collection name {name!r}: use 1-128 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return name


def point_id(*parts: str | int) -> str:
    """A deterministic UUID string for a point, from the parts that identify it (e.g. doc id and page).

    Writing the same page twice then overwrites one point instead of adding a duplicate.
    """
    if not parts:
        raise StoreError("point_id needs at least one part")
    # \x1f (unit separator) keeps ("a", "bc") and ("ab", "c") apart.
    return str(uuid.uuid5(_ID_NAMESPACE, "\x1f".join(str(p) for p in parts)))


def _canonical_id(value: object) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise StoreError(f"point id {value!r} is not a UUID string (see docvec.store.point_id)") from None


@dataclass(frozen=True)
class Point:
    """One stored vector: a UUID string id, a 1-D float32 vector and a JSON-able payload.

    The id is normalised to the canonical lowercase hyphenated form (the one the stores give back) and the
    vector to a 1-D float32 array; anything else raises :class:`StoreError`.
    """

    id: str
    vector: npt.NDArray[np.float32]
    payload: dict[str, Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", _canonical_id(self.id))
        vec = np.asarray(self.vector, dtype=np.float32)
        if vec.ndim != 1 or vec.size == 0:
            raise StoreError(f"point {self.id}: vector must be 1-D and non-empty, got shape {vec.shape}")
        if not np.isfinite(vec).all():
            raise StoreError(f"point {self.id}: vector has NaN or infinite values")
        object.__setattr__(self, "vector", vec)
        if not isinstance(self.payload, dict):
            raise StoreError(f"point {self.id}: payload must be a dict, got {type(self.payload).__name__}")


@dataclass(frozen=True)
class Hit:
    """A search result: point id, cosine similarity (higher is closer) and the point's payload."""

    id: str
    score: float
    payload: dict[str, Any]


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
    any element of the list ``tags``. An empty filter matches every point.
    """

    doc_ids: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for field in ("doc_ids", "sources", "tags"):
            object.__setattr__(self, field, _as_tuple(field, getattr(self, field)))

    @property
    def is_empty(self) -> bool:
        """True when the filter has no condition (and so matches every point)."""
        return not (self.doc_ids or self.sources or self.tags)

    def conditions(self) -> list[tuple[str, tuple[str, ...]]]:
        """The (payload field, accepted values) pairs that must all hold; backends build their filter
        from these."""
        pairs = [("doc_id", self.doc_ids), ("source", self.sources), ("tags", self.tags)]
        return [(key, values) for key, values in pairs if values]


class ClosingContext:
    """``with store: ...`` closes the store on the way out; the backends share this."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class VectorStore(Protocol):
    """A store of named collections of :class:`Point`; one dense cosine vector (``"page"``) per point.

    Implementations: :class:`docvec.store.EdgeStore` (embedded, the default) and
    :class:`docvec.store.RemoteStore` (a Qdrant server). Every method raises :class:`StoreError` (or a
    subclass) on failure, never a backend's own exception.
    """

    def ensure_collection(self, name: str, dim: int) -> None:
        """Create the collection if missing (cosine vector ``"page"`` of ``dim``, keyword indexes on
        doc_id, source and tags); raise :class:`StoreError` if it exists with another dim."""
        ...

    def upsert(self, name: str, points: Sequence[Point]) -> None:
        """Insert or overwrite points (same id, same point), sent in batches."""
        ...

    def delete(self, name: str, ids: Sequence[str]) -> None:
        """Delete points by id; ids that do not exist are ignored."""
        ...

    def delete_where(self, name: str, flt: Filter) -> None:
        """Delete every point matching ``flt``; an empty filter is refused."""
        ...

    @overload
    def scroll(
        self, name: str, flt: Filter | None = None, *, with_vectors: Literal[False] = False, batch: int = 256
    ) -> Iterator[tuple[str, dict[str, Any]]]: ...

    @overload
    def scroll(
        self, name: str, flt: Filter | None = None, *, with_vectors: Literal[True], batch: int = 256
    ) -> Iterator[Point]: ...

    def scroll(
        self, name: str, flt: Filter | None = None, *, with_vectors: bool = False, batch: int = 256
    ) -> Iterator[tuple[str, dict[str, Any]]] | Iterator[Point]:
        """Iterate over matching points, ``batch`` per request: ``(id, payload)`` pairs, or whole
        :class:`Point` objects when ``with_vectors``."""
        ...

    def count(self, name: str, flt: Filter | None = None) -> int:
        """Exact number of points matching ``flt`` (all points when ``None``)."""
        ...

    def facet(self, name: str, field: str) -> dict[str, int]:
        """Every value of the indexed payload ``field`` (one of ``INDEXED_FIELDS``) and how many points
        have it, counted exactly from the field's index (no scan of the points)."""
        ...

    def search(self, name: str, vector: npt.ArrayLike, k: int, flt: Filter | None = None) -> list[Hit]:
        """The ``k`` points most similar to ``vector`` (cosine), best first, among those matching ``flt``."""
        ...

    def optimize(self, name: str) -> bool:
        """Bring the collection's search structures up to date with recent writes; blocks until done and
        says whether anything changed (a server does this by itself in the background: no-op there)."""
        ...

    def collections(self) -> list[str]:
        """Names of the existing collections, sorted."""
        ...

    def flush(self) -> None:
        """Make every acknowledged write durable on disk (a no-op where the server does it)."""
        ...

    def close(self) -> None:
        """Flush and release the store; calling it twice is harmless."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def as_query_vector(vector: npt.ArrayLike, dim: int, collection: str) -> npt.NDArray[np.float32]:
    """``vector`` as a 1-D float32 array of ``dim`` values, or :class:`StoreError` naming the collection."""
    vec = np.asarray(vector, dtype=np.float32)
    if vec.ndim != 1 or vec.shape[0] != dim:
        raise StoreError(f"collection {collection!r}: query vector has shape {vec.shape}, expected ({dim},)")
    if not np.isfinite(vec).all():
        raise StoreError(f"collection {collection!r}: query vector has NaN or infinite values")
    return vec


def check_dims(points: Sequence[Point], dim: int, collection: str) -> None:
    """Raise :class:`StoreError` naming the first point whose vector is not ``dim`` long.

    Checked before anything is sent, so that a bad batch writes nothing rather than half of itself.
    """
    for p in points:
        if p.vector.shape[0] != dim:
            raise StoreError(
                f"collection {collection!r}: point {p.id} has a {p.vector.shape[0]}-d vector, "
                f"the collection holds {dim}-d vectors"
            )


def check_facet_field(field: str, collection: str) -> None:
    """Raise :class:`StoreError` unless ``field`` has a payload index to count from."""
    if field not in INDEXED_FIELDS:
        raise StoreError(
            f"collection {collection!r}: cannot count values of {field!r}, "
            f"only of {', '.join(INDEXED_FIELDS)}"
        )


def check_k(k: int, collection: str) -> None:
    """Raise :class:`StoreError` unless ``k`` is a positive int."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise StoreError(f"collection {collection!r}: k must be a positive integer, got {k!r}")


def check_batch(batch: int) -> None:
    """Raise :class:`StoreError` unless ``batch`` is a positive int."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise StoreError(f"batch must be a positive integer, got {batch!r}")


def check_dim(dim: int) -> None:
    """Raise :class:`StoreError` unless ``dim`` is a vector size Qdrant accepts (1..65536)."""
    if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= 65536:
        raise StoreError(f"vector dim must be an integer from 1 to 65536, got {dim!r}")


def canonical_ids(ids: Sequence[str]) -> list[str]:
    """Point ids in canonical UUID form; a bare string is refused (it would be read as characters)."""
    if isinstance(ids, str):
        raise StoreError("ids must be a sequence of id strings, not one string")
    return [_canonical_id(i) for i in ids]


def batches(points: Sequence[Point], size: int) -> Iterator[Sequence[Point]]:
    """Consecutive slices of at most ``size`` points."""
    for start in range(0, len(points), size):
        yield points[start : start + size]
