"""The store core: points, filters, the :class:`Store` every caller uses, and the :class:`Backend`
protocol its two backends implement.

A collection's name is what users search; behind it stand versions, physical collections named
``NAME.vN``, one of them live. The name is an alias of the live version, switched atomically (a Qdrant
collection alias on a server, a durable pointer file in the embedded store); a collection made before
versions existed is its own first version (it keeps its name, no copy). Every operation takes a name or a
version; a name reaches its live version.

:class:`Store` holds everything the backends share: validation (names, dims, ids, ``k``, batch sizes, in
that order, before anything is sent), batching of writes, paging of scrolls, the conversion of stored
records into :class:`Point` values, and the closed state. A backend keeps to the primitives that really
differ between Qdrant's embedded engine and a Qdrant server, one call each, and to translating its
library's errors into docvec's; the way httpx keeps a transport to ``handle_request`` and ``close``.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast, overload

import numpy as np
import numpy.typing as npt

from .._closing import Closing
from .._errors import CollectionNotFoundError, StoreError

__all__ = [
    "DELETE_BATCH",
    "LAYOUT",
    "VERSION_RE",
    "Backend",
    "Filter",
    "Layout",
    "Point",
    "Record",
    "ScoredPoint",
    "Store",
    "point_id",
]


@dataclass(frozen=True)
class Layout:
    """How docvec lays out a collection, the same on both backends."""

    #: the dense vector, one per page
    vector: str = "page"
    #: a multi-vector collection's other vector: one 128-d vector per token, scored by late interaction
    #: (MaxSim: the sum over query tokens of their best cosine among the page's tokens). Stored as Qdrant
    #: recommends for ColPali-style data: float16, no HNSW graph (m=0; a graph over token vectors takes
    #: minutes to build and is not used: a search either reranks the pages a dense prefetch found, or scans
    #: every page), memory-mapped from disk (the OS keeps what searches read in its cache), with an int8
    #: copy, memory-mapped too. An exhaustive MaxSim scans the int8 copy and rescores its best
    #: ``token_oversampling * k`` pages with the float16 tokens: 1.4x faster than scanning float16 at 10k
    #: pages, the same top 10 and exact scores (benchmarks/bench_search.py), for 1 byte a token component
    #: on disk. A hybrid search scores its few prefetched pages with the float16 tokens directly: scoring
    #: 100 with int8 and rescoring took longer than that.
    tokens: str = "tokens"
    #: its distance; scores are cosine similarities in [-1, 1]
    distance: str = "cosine"
    #: how new collections store it: half of float32's memory and disk. The rounding (relative 2**-11 per
    #: component) moves a cosine score by under 1e-3, below the model's own bf16 noise.
    datatype: str = "float16"
    #: New collections also keep an int8 copy of each vector in RAM (scalar quantization, this quantile of
    #: values clipped): a search scans those, a quarter of the float32 bytes, takes the best
    #: ``oversampling * k``, and rescores them with the stored vectors, so the scores returned are exact.
    #: benchmarks/bench_search.py measures the cost in recall@10 against an exact float32 scan: 1.000 at
    #: 10k and 100k points with 2x oversampling, 0.94-0.95 without.
    quantile: float = 0.99
    oversampling: float = 2.0
    #: the exhaustive MaxSim's: its int8 scan put the true top 10 within the best 2 * 10 at 2k and 10k
    #: pages in the benchmark, within the best 10 for 97.5%; rescoring 40 pages costs ~3 ms of ~470
    token_oversampling: float = 4.0
    #: payload fields filters use; both backends create a keyword index on each (collections made before
    #: ``state`` or ``image`` have no index on them: filtering on them still works, by reading payloads)
    indexed_fields: tuple[str, ...] = ("doc_id", "source", "tags", "state", "image")


#: the layout of every collection docvec creates
LAYOUT = Layout()
#: ids per delete request
DELETE_BATCH = 1024

# Names become folder names in the embedded store, so keep them to a portable, path-safe alphabet;
# the server backend applies the same rule so that a collection can move between backends.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
#: a version of collection NAME is named NAME.vN (N from 1)
VERSION_RE = re.compile(r"(?P<name>.+)\.v(?P<number>[1-9][0-9]*)")
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
    #: a multi-vector collection's token vectors: [tokens, token dim]
    tokens: npt.NDArray[np.float32] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", _canonical_id(self.id))
        vec = np.asarray(self.vector, dtype=np.float32)
        if vec.ndim != 1 or vec.size == 0:
            raise StoreError(f"point {self.id}: vector must be 1-D and non-empty, got shape {vec.shape}")
        if not np.isfinite(vec).all():
            raise StoreError(f"point {self.id}: vector has NaN or infinite values")
        object.__setattr__(self, "vector", vec)
        if self.tokens is not None:
            object.__setattr__(self, "tokens", _token_array(f"point {self.id}", self.tokens))
        if not isinstance(self.payload, dict):
            raise StoreError(f"point {self.id}: payload must be a dict, got {type(self.payload).__name__}")


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


def _token_array(what: str, tokens: npt.ArrayLike) -> npt.NDArray[np.float32]:
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

    def create_collection(self, name: str, dim: int, tokens: int | None = None) -> None:
        """Create collection ``name``: cosine vector ``LAYOUT.vector`` of ``dim`` (float16, an int8 copy),
        keyword indexes on ``LAYOUT.indexed_fields``; with ``tokens``, also the multi-vector
        ``LAYOUT.tokens`` of that dim (MaxSim). Creating one that another client made meanwhile, with the same
        dim, is not an error."""
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

    def scroll(
        self, name: str, flt: Filter | None, limit: int, offset: Any, vectors: tuple[str, ...]
    ) -> tuple[list[Record], Any]:
        """One page of matching records from ``offset`` (``None``: the start), with the named ``vectors``
        (none when empty), and the next page's offset (``None`` after the last)."""
        ...

    def count(self, name: str, flt: Filter | None) -> int:
        """Exact number of matching points."""
        ...

    def facet(self, name: str, field: str, limit: int) -> dict[str, int]:
        """Up to ``limit`` values of the indexed payload ``field``, each with its (non-zero) point count."""
        ...

    def search(
        self, name: str, vector: npt.NDArray[np.float32], k: int, flt: Filter | None
    ) -> list[ScoredPoint]:
        """The ``k`` best points for ``vector`` (cosine), best first, among those matching ``flt``."""
        ...

    def search_tokens(
        self,
        name: str,
        tokens: npt.NDArray[np.float32],
        k: int,
        flt: Filter | None,
        prefetch: tuple[npt.NDArray[np.float32], int] | None,
    ) -> list[ScoredPoint]:
        """The ``k`` best points for the query ``tokens`` by MaxSim, best first, among those matching
        ``flt``: of every point, or, with ``prefetch`` (a dense vector and N), of the N best points for that
        vector, in one query."""
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


def _check_positive(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StoreError(f"{what} must be a positive integer, got {value!r}")
    return value


def _check_collection_name(name: str) -> str:
    """Return ``name`` if it is a valid collection name (letters, digits, ``_ . -``; up to 128), else raise
    :class:`StoreError`."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise StoreError(
            f"invalid collection name {name!r}: use 1-128 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return name


class Store(Closing):
    """Named collections of :class:`Point` (one dense cosine vector each) on a :class:`Backend`.

    Every method raises :class:`StoreError` (or a subclass) on failure, never a backend's own exception.
    Thread-safe as far as its backend is: the core keeps no per-call state. Use it as a context manager,
    or call :meth:`close`.
    """

    def __init__(self, backend: Backend, *, batch_size: int = 256) -> None:
        self.backend = backend
        self.batch_size = _check_positive("batch size", batch_size)
        self._dims: dict[str, int] = {}
        self._token_dims: dict[str, int | None] = {}
        self._lock = threading.Lock()
        self._closed = False

    @property
    def where(self) -> str:
        """Where the collections live: the embedded store's folder, or the server's URL."""
        return self.backend.where

    # -- collections -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store at {self.where} is closed")

    def _target(self, name: str) -> str:
        """The collection an operation on ``name`` reaches: the live version when ``name`` is an alias and
        the backend does not resolve aliases itself, else ``name``."""
        if self.backend.resolves_aliases:
            return name
        return self.backend.aliases().get(name, name)

    def _dim(self, name: str) -> int:
        """The dim of an existing collection (asked of the backend once), or CollectionNotFoundError."""
        return self._open(name)[1]

    def _open(self, name: str) -> tuple[str, int]:
        """The collection an operation on ``name`` reaches, and its dim; CollectionNotFoundError when
        there is none."""
        _check_collection_name(name)
        self._check_open()
        name = self._target(name)
        dim = self._dims.get(name)
        if dim is None:
            dim = self.backend.collection_dim(name)
            if dim is None:
                raise CollectionNotFoundError(f"collection {name!r} does not exist at {self.where}")
            with self._lock:
                self._dims[name] = dim
        return name, dim

    def ensure_collection(
        self, name: str, dim: int, record: dict[str, Any] | None = None, *, tokens: int | None = None
    ) -> str:
        """The live version of collection ``name``, created as its first version (``NAME.v1``: cosine
        vector ``"page"`` of ``dim``, keyword indexes on ``LAYOUT.indexed_fields``, with ``tokens`` token
        vectors of that dim too, ``record`` as its record) when there is none; :class:`StoreError` if it
        exists with another dim, or another kind (single- or multi-vector)."""
        live = self.live(name)
        if live is None:
            live = self.create_version(name, dim, record, tokens=tokens)
            self.switch(name, live)
            return live
        existing = self._dim(live)
        if existing != dim:
            raise StoreError(
                f"collection {name!r} exists at {self.where} with {existing}-d vectors, not {dim}-d: "
                "use another collection name, or `docvec reindex` it"
            )
        if self.token_dim(live) != tokens:
            kind = "multi-vector" if self.token_dim(live) else "single-vector"
            raise StoreError(
                f"collection {name!r} at {self.where} is {kind}: use another collection name, or "
                "`docvec reindex` it"
            )
        return live

    def token_dim(self, name: str) -> int | None:
        """The dim of a collection's token vectors (a multi-vector collection), else ``None``."""
        target = self._open(name)[0]
        if target not in self._token_dims:
            found = self.backend.token_dim(target)
            with self._lock:
                self._token_dims[target] = found
        return self._token_dims[target]

    def collections(self) -> list[str]:
        """Names of the existing collections, sorted (their versions: :meth:`versions`)."""
        self._check_open()
        names = set(self.backend.aliases())
        for c in self.backend.collections():
            m = VERSION_RE.fullmatch(c)
            names.add(m["name"] if m else c)
        return sorted(names)

    # -- versions ----------------------------------------------------------------------------------

    def live(self, name: str) -> str | None:
        """The version a search of collection ``name`` reads: the one its alias points at, ``name`` itself
        for a collection made before versions, ``None`` when there is none."""
        _check_collection_name(name)
        self._check_open()
        target = self.backend.aliases().get(name)
        if target is not None:
            return target
        return name if name in self.backend.collections() else None

    def versions(self, name: str) -> list[str]:
        """Every version of collection ``name``, oldest first (live or not, complete or not)."""
        _check_collection_name(name)
        self._check_open()
        found = []
        for c in self.backend.collections():
            m = VERSION_RE.fullmatch(c)
            if c == name:
                found.append((0, c))
            elif m is not None and m["name"] == name:
                found.append((int(m["number"]), c))
        return [c for _, c in sorted(found)]

    def create_version(
        self, name: str, dim: int, record: dict[str, Any] | None = None, *, tokens: int | None = None
    ) -> str:
        """Create the next version of collection ``name`` (not live: see :meth:`switch`), with ``tokens``
        token vectors of that dim when it is a multi-vector collection, and return it."""
        _check_collection_name(name)
        if VERSION_RE.fullmatch(name):
            raise StoreError(f"{name!r} is a version's name: give the collection's name")
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= 65536:
            raise StoreError(f"vector dim must be an integer from 1 to 65536, got {dim!r}")
        numbers = [0] + [int(m["number"]) for v in self.versions(name) if (m := VERSION_RE.fullmatch(v))]
        version = _check_collection_name(f"{name}.v{max(numbers) + 1}")
        if tokens is not None and (isinstance(tokens, bool) or not 1 <= tokens <= 65536):
            raise StoreError(f"token vector dim must be an integer from 1 to 65536, got {tokens!r}")
        self.backend.create_collection(version, dim, tokens)
        if record is not None:
            self.backend.write_record(version, record)
        with self._lock:
            self._dims[version] = dim
            self._token_dims[version] = tokens
        return version

    def switch(self, name: str, version: str) -> None:
        """Make ``version`` the live version of collection ``name``, atomically."""
        if version not in self.versions(name):
            raise StoreError(f"{version!r} is not a version of collection {name!r} at {self.where}")
        self.backend.set_alias(name, version)
        with self._lock:
            self._dims.pop(name, None)
            self._token_dims.pop(name, None)

    def drop(self, version: str) -> None:
        """Delete a version that is not live (``NAME.vN``, or a collection made before versions)."""
        _check_collection_name(version)
        self._check_open()
        if version not in self.backend.collections():
            raise CollectionNotFoundError(f"there is no version {version!r} at {self.where}")
        m = VERSION_RE.fullmatch(version)
        name = m["name"] if m else version
        if self.live(name) == version:
            raise StoreError(f"version {version!r} is live (collection {name!r}): it cannot be dropped")
        self.backend.drop_collection(version)
        with self._lock:
            self._dims.pop(version, None)
            self._token_dims.pop(version, None)

    def record(self, version: str) -> dict[str, Any] | None:
        """docvec's record of a version (what made its vectors, whether it is complete), or ``None``."""
        _check_collection_name(version)
        self._check_open()
        return self.backend.read_record(self._target(version))

    def set_record(self, version: str, record: dict[str, Any]) -> None:
        """Replace docvec's record of a version."""
        self._dim(version)
        self.backend.write_record(self._target(version), record)

    # -- writes ------------------------------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[Point]) -> None:
        """Insert or overwrite points (same id, same point), ``batch_size`` per request.

        Every vector's dim is checked before anything is sent, so a bad batch writes nothing rather than
        half of itself.
        """
        points = list(points)
        target, dim = self._open(name)
        tokens = self.token_dim(target)
        for p in points:
            if p.vector.shape[0] != dim:
                raise StoreError(
                    f"collection {name!r}: point {p.id} has a {p.vector.shape[0]}-d vector, "
                    f"the collection holds {dim}-d vectors"
                )
            if tokens is None and p.tokens is not None:
                raise StoreError(f"collection {name!r} is single-vector: point {p.id} has token vectors")
            if tokens is not None and (p.tokens is None or p.tokens.shape[1] != tokens):
                got = "none" if p.tokens is None else f"{p.tokens.shape[1]}-d ones"
                raise StoreError(
                    f"collection {name!r} holds {tokens}-d token vectors for every page: "
                    f"point {p.id} has {got}"
                )
        for start in range(0, len(points), self.batch_size):
            self.backend.upsert(target, points[start : start + self.batch_size])

    def delete(self, name: str, ids: Sequence[str]) -> None:
        """Delete points by id; ids that do not exist are ignored."""
        if isinstance(ids, str):
            raise StoreError("ids must be a sequence of id strings, not one string")
        canonical = [_canonical_id(i) for i in ids]
        target = self._open(name)[0]
        for start in range(0, len(canonical), DELETE_BATCH):
            self.backend.delete(target, canonical[start : start + DELETE_BATCH])

    def delete_where(self, name: str, flt: Filter) -> None:
        """Delete every point matching ``flt``; an empty filter is refused (it would delete everything)."""
        if flt.is_empty:
            raise StoreError(f"collection {name!r}: delete_where needs a filter with at least one condition")
        self.backend.delete_where(self._open(name)[0], flt)

    def set_payload(self, name: str, flt: Filter, payload: dict[str, Any]) -> None:
        """Set the fields of ``payload`` on every point matching ``flt``, keeping their other fields and
        their vectors; an empty filter is refused."""
        if flt.is_empty:
            raise StoreError(f"collection {name!r}: set_payload needs a filter with at least one condition")
        self.backend.set_payload(self._open(name)[0], flt, payload)

    # -- reads -------------------------------------------------------------------------------------

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
        """Iterate over the points matching ``flt``, ``batch`` per request: ``(id, payload)`` pairs, or
        whole :class:`Point` objects when ``with_vectors`` (vectors come back unit-length: cosine
        collections store them normalised)."""
        _check_positive("batch", batch)
        target = self._open(name)[0]  # a missing collection fails at the call, not at the first next()
        if with_vectors:
            return self._points(target, flt, batch)
        return ((r.id, r.payload) for r in self._records(target, flt, batch, vectors=()))

    def _records(
        self, name: str, flt: Filter | None, batch: int, *, vectors: tuple[str, ...]
    ) -> Iterator[Record]:
        offset: Any = None
        while True:
            self._check_open()
            records, offset = self.backend.scroll(name, flt, batch, offset, vectors)
            yield from records
            if offset is None:
                return

    def _points(self, name: str, flt: Filter | None, batch: int) -> Iterator[Point]:
        names = (LAYOUT.vector, LAYOUT.tokens) if self.token_dim(name) else (LAYOUT.vector,)
        for r in self._records(name, flt, batch, vectors=names):
            vector = (r.vectors or {}).get(LAYOUT.vector)
            if vector is None:
                raise StoreError(f"collection {name!r}: point {r.id} has no {LAYOUT.vector!r} vector")
            tokens = (r.vectors or {}).get(LAYOUT.tokens)
            yield Point(
                r.id,
                np.asarray(vector, dtype=np.float32),
                r.payload,
                None if tokens is None else np.asarray(tokens, dtype=np.float32),
            )

    def count(self, name: str, flt: Filter | None = None) -> int:
        """Exact number of points matching ``flt`` (all points when ``None``)."""
        return self.backend.count(self._open(name)[0], flt)

    def facet(self, name: str, field: str) -> dict[str, int]:
        """Every value of the indexed payload ``field`` (one of ``LAYOUT.indexed_fields``) and how many points
        have it, counted exactly from the field's index (no scan of the points)."""
        indexed = LAYOUT.indexed_fields
        if field not in indexed:
            raise StoreError(
                f"collection {name!r}: cannot count values of {field!r}, only of {', '.join(indexed)}"
            )
        # no more distinct values than points: asking for that many returns them all
        target = self._open(name)[0]
        total = self.backend.count(target, None)
        return self.backend.facet(target, field, max(total, 1))

    def search(
        self,
        name: str,
        vector: npt.ArrayLike | None,
        k: int,
        flt: Filter | None = None,
        *,
        tokens: npt.ArrayLike | None = None,
        prefetch: int | None = None,
    ) -> list[ScoredPoint]:
        """The ``k`` best points among those matching ``flt``, best first, by one of three scores:

        - ``vector`` alone: cosine similarity to the dense vector;
        - ``tokens`` alone (a multi-vector collection): MaxSim of the query's token vectors over every point;
        - both, and ``prefetch`` N: the N points most similar to ``vector``, reranked by MaxSim (one query).
        """
        _check_positive(f"collection {name!r}: k", k)
        target, dim = self._open(name)
        vec = None
        if vector is not None:
            vec = np.asarray(vector, dtype=np.float32)
            if vec.ndim != 1 or vec.shape[0] != dim:
                raise StoreError(
                    f"collection {name!r}: query vector has shape {vec.shape}, expected ({dim},)"
                )
            if not np.isfinite(vec).all():
                raise StoreError(f"collection {name!r}: query vector has NaN or infinite values")
        if tokens is None:
            if vec is None:
                raise StoreError(f"collection {name!r}: a search needs a query vector or token vectors")
            return self.backend.search(target, vec, k, flt)
        width = self.token_dim(target)
        if width is None:
            raise StoreError(f"collection {name!r} is single-vector: it has no token vectors to search")
        query = _token_array(f"collection {name!r}: the query", tokens)
        if query.shape[1] != width:
            raise StoreError(
                f"collection {name!r}: query token vectors are {query.shape[1]}-d, expected {width}-d"
            )
        if (vec is None) != (prefetch is None):
            raise StoreError(f"collection {name!r}: a prefetch needs both a query vector and its size N")
        if prefetch is not None:
            _check_positive(f"collection {name!r}: prefetch", prefetch)
        return self.backend.search_tokens(
            target, query, k, flt, None if vec is None or prefetch is None else (vec, max(prefetch, k))
        )

    # -- maintenance and lifetime ------------------------------------------------------------------

    def optimize(self, name: str) -> bool:
        """Bring the collection's search structures up to date with recent writes; blocks until done and
        says whether anything changed (a server does this by itself in the background: no-op there)."""
        return self.backend.optimize(self._open(name)[0])

    def advertise(self, **fields: Any) -> None:
        """Tell other processes that find the embedded store held by this one ``fields`` (a server: the
        URL it answers at); nothing with a Qdrant server, which every process uses directly."""
        self._check_open()
        self.backend.advertise(fields)

    def flush(self) -> None:
        """Make every acknowledged write durable on disk (a no-op where the server does it)."""
        self._check_open()
        self.backend.flush()

    def close(self) -> None:
        """Flush and release the store; calling it twice is harmless."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.backend.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"Store({self.where!r}, {type(self.backend).__name__}, {state})"
