"""The store core: the :class:`Store` every caller uses, in front of a
:class:`~docvec._store._backend.Backend`.

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

import threading
from collections.abc import Iterator, Sequence
from typing import Any, Literal, overload

import numpy as np

from .._closing import Closing
from .._config import COLLECTION_NAME_RE, VERSION_RE
from .._errors import CollectionNotFoundError, ConflictError, StoreError
from .._records import PagePayload
from ._backend import Backend
from ._layout import LAYOUT
from ._points import (
    Dense,
    Filter,
    Fused,
    Fusion,
    Hybrid,
    Keywords,
    MaxSim,
    Point,
    Record,
    ScoredPoint,
    Scroll,
    StoreQuery,
    Visual,
    canonical_id,
    check_terms,
    token_array,
)

__all__ = ["DELETE_BATCH", "VERSION_RE", "Store"]

#: ids per delete request
DELETE_BATCH = 1024


def _check_positive(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StoreError(f"{what} must be a positive integer, got {value!r}")
    return value


def _check_collection_name(name: str) -> str:
    """Return ``name`` if it is a valid collection name (letters, digits, ``_ . -``; up to 128), else raise
    :class:`StoreError`."""
    if not isinstance(name, str) or not COLLECTION_NAME_RE.fullmatch(name):
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
        self._texts: dict[str, bool] = {}
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
        self,
        name: str,
        dim: int,
        record: dict[str, Any] | None = None,
        *,
        tokens: int | None = None,
        text: bool = False,
    ) -> str:
        """The live version of collection ``name``, created as its first version (``NAME.v1``: cosine
        vector ``"page"`` of ``dim``, keyword indexes on ``LAYOUT.indexed_fields``, with ``tokens`` token
        vectors of that dim too, with ``text`` the page text's sparse vector, ``record`` as its record)
        when there is none; :class:`StoreError` if it exists with another dim, or another kind (single- or
        multi-vector). An existing collection keeps whether it has text (`docvec reindex --text` adds it)."""
        live = self.live(name)
        if live is None:
            live = self.create_version(name, dim, record, tokens=tokens, text=text)
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

    def has_text(self, name: str) -> bool:
        """Whether a collection keeps its pages' text as a sparse vector (keyword search)."""
        target = self._open(name)[0]
        if target not in self._texts:
            found = self.backend.has_text(target)
            with self._lock:
                self._texts[target] = found
        return self._texts[target]

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
        self,
        name: str,
        dim: int,
        record: dict[str, Any] | None = None,
        *,
        tokens: int | None = None,
        text: bool = False,
    ) -> str:
        """Create the next version of collection ``name`` (not live: see :meth:`switch`), with ``tokens``
        token vectors of that dim when it is a multi-vector collection, the text's sparse vector with
        ``text``, and return it."""
        _check_collection_name(name)
        if VERSION_RE.fullmatch(name):
            raise StoreError(f"{name!r} is a version's name: give the collection's name")
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= 65536:
            raise StoreError(f"vector dim must be an integer from 1 to 65536, got {dim!r}")
        numbers = [0] + [int(m["number"]) for v in self.versions(name) if (m := VERSION_RE.fullmatch(v))]
        version = _check_collection_name(f"{name}.v{max(numbers) + 1}")
        if tokens is not None and (isinstance(tokens, bool) or not 1 <= tokens <= 65536):
            raise StoreError(f"token vector dim must be an integer from 1 to 65536, got {tokens!r}")
        self.backend.create_collection(version, dim, tokens, text)
        if record is not None:
            self.backend.write_record(version, record)
        with self._lock:
            self._dims[version] = dim
            self._token_dims[version] = tokens
            self._texts[version] = text
        return version

    def switch(self, name: str, version: str) -> None:
        """Make ``version`` the live version of collection ``name``, atomically."""
        if version not in self.versions(name):
            raise StoreError(f"{version!r} is not a version of collection {name!r} at {self.where}")
        self.backend.set_alias(name, version)
        with self._lock:
            self._dims.pop(name, None)
            self._token_dims.pop(name, None)
            self._texts.pop(name, None)

    def drop(self, version: str) -> None:
        """Delete a version that is not live (``NAME.vN``, or a collection made before versions)."""
        _check_collection_name(version)
        self._check_open()
        if version not in self.backend.collections():
            raise CollectionNotFoundError(f"there is no version {version!r} at {self.where}")
        m = VERSION_RE.fullmatch(version)
        name = m["name"] if m else version
        if self.live(name) == version:
            raise ConflictError(f"version {version!r} is live (collection {name!r}): it cannot be dropped")
        self.backend.drop_collection(version)
        with self._lock:
            self._dims.pop(version, None)
            self._token_dims.pop(version, None)
            self._texts.pop(version, None)

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
        text = self.has_text(target)
        for p in points:
            if p.terms is not None and not text:
                raise StoreError(f"collection {name!r} keeps no text: point {p.id} has terms")
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
        canonical = [canonical_id(i) for i in ids]
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
        self,
        name: str,
        flt: Filter | None = None,
        *,
        with_vectors: Literal[False] = False,
        batch: int = 256,
        with_text: bool = False,
    ) -> Iterator[tuple[str, dict[str, Any]]]: ...

    @overload
    def scroll(
        self,
        name: str,
        flt: Filter | None = None,
        *,
        with_vectors: Literal[True],
        batch: int = 256,
        with_text: bool = False,
    ) -> Iterator[Point]: ...

    def scroll(
        self,
        name: str,
        flt: Filter | None = None,
        *,
        with_vectors: bool = False,
        batch: int = 256,
        with_text: bool = False,
    ) -> Iterator[tuple[str, dict[str, Any]]] | Iterator[Point]:
        """Iterate over the points matching ``flt``, ``batch`` per request: ``(id, payload)`` pairs, or
        whole :class:`Point` objects when ``with_vectors`` (vectors come back unit-length: cosine
        collections store them normalised). A page's text (payload field ``text``) comes only
        ``with_text``: it is most of a payload's bytes, and what walks every page rarely needs it."""
        _check_positive("batch", batch)
        target = self._open(name)[0]  # a missing collection fails at the call, not at the first next()
        without = () if with_text else (LAYOUT.text_field,)
        if with_vectors:
            return self._points(target, flt, batch, without)
        return ((r.id, r.payload) for r in self._records(target, flt, batch, vectors=(), without=without))

    def pages(
        self, name: str, flt: Filter | None = None, *, batch: int = 256, with_text: bool = False
    ) -> Iterator[tuple[str, PagePayload]]:
        """:meth:`scroll`'s ``(id, payload)`` pairs, each payload read as the page docvec stored
        (:class:`~docvec.PagePayload`): the one place stored pages are read back, through the type they
        were written with."""
        for pid, payload in self.scroll(name, flt, batch=batch, with_text=with_text):
            yield pid, PagePayload.model_validate(payload)

    def page(self, name: str, flt: Filter) -> PagePayload | None:
        """Any one page matching ``flt`` (a document's pages all carry its summary), or ``None``."""
        return next((page for _, page in self.pages(name, flt, batch=1)), None)

    def _records(
        self, name: str, flt: Filter | None, batch: int, *, vectors: tuple[str, ...], without: tuple[str, ...]
    ) -> Iterator[Record]:
        page, offset = Scroll(flt, batch, vectors, without), None
        while True:
            self._check_open()
            records, offset = self.backend.scroll(name, page, offset)
            yield from records
            if offset is None:
                return

    def _points(self, name: str, flt: Filter | None, batch: int, without: tuple[str, ...]) -> Iterator[Point]:
        names = (LAYOUT.vector, LAYOUT.tokens) if self.token_dim(name) else (LAYOUT.vector,)
        for r in self._records(name, flt, batch, vectors=names, without=without):
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

    def search(self, name: str, query: StoreQuery, k: int, flt: Filter | None = None) -> list[ScoredPoint]:
        """The ``k`` best points among those matching ``flt``, best first, as ``query`` scores them: by a
        dense vector (:class:`Dense`), by MaxSim over every point's token vectors (:class:`MaxSim`, a
        multi-vector collection), by MaxSim over the dense vector's best points (:class:`Hybrid`), by
        keywords in the points' text (:class:`Keywords`, a collection with text), or a visual ranking fused
        with the keyword one (:class:`Fused`). A keyword query without a term finds nothing (fused: the
        visual ranking alone)."""
        _check_positive(f"collection {name!r}: k", k)
        target, dim = self._open(name)
        wanted: Dense | MaxSim | Hybrid | None
        keywords: Keywords | None = None
        depth, weight = k, 1.0
        if isinstance(query, Fused):
            wanted, keywords, depth, weight = query.visual, query.keywords, query.depth, query.weight
        elif isinstance(query, Keywords):
            wanted, keywords = None, query
        else:
            wanted = query
        visual = None if wanted is None else self._visual(name, target, dim, wanted, k)
        if keywords is not None:
            if not self.has_text(target):
                raise StoreError(f"collection {name!r} keeps no text: it has no keyword index to search")
            terms = check_terms(f"collection {name!r}: the query", keywords.terms)
            _check_positive(f"collection {name!r}: depth", depth)
            number = isinstance(weight, int | float) and not isinstance(weight, bool)
            if not number or not 0 <= weight < float("inf"):
                raise StoreError(
                    f"collection {name!r}: the keyword weight must be a number >= 0, got {weight!r}"
                )
            if terms.indices:
                fusion = None if visual is None else Fusion(visual, max(depth, k), float(weight))
                return self.backend.search_text(target, terms, k, flt, fusion)
            if visual is None:
                return []  # no term to look up, and no visual ranking: nothing
            # no term to look up: the visual ranking alone
        assert visual is not None
        return self.backend.search(target, visual, k, flt)

    def _visual(self, name: str, target: str, dim: int, query: Dense | MaxSim | Hybrid, k: int) -> Visual:
        """A visual query, checked against the collection, as the backends take it."""
        if not isinstance(query, Dense | MaxSim | Hybrid):
            raise StoreError(f"collection {name!r}: {type(query).__name__} is no search the store knows")
        vec = None
        if isinstance(query, Dense | Hybrid):
            vec = np.asarray(query.vector, dtype=np.float32)
            if vec.ndim != 1 or vec.shape[0] != dim:
                raise StoreError(
                    f"collection {name!r}: query vector has shape {vec.shape}, expected ({dim},)"
                )
            if not np.isfinite(vec).all():
                raise StoreError(f"collection {name!r}: query vector has NaN or infinite values")
        if isinstance(query, Dense):
            return Visual(vector=vec)
        width = self.token_dim(target)
        if width is None:
            raise StoreError(f"collection {name!r} is single-vector: it has no token vectors to search")
        tokens = token_array(f"collection {name!r}: the query", query.tokens)
        if tokens.shape[1] != width:
            raise StoreError(
                f"collection {name!r}: query token vectors are {tokens.shape[1]}-d, expected {width}-d"
            )
        if isinstance(query, MaxSim):
            return Visual(tokens=tokens)
        _check_positive(f"collection {name!r}: prefetch", query.prefetch)
        return Visual(vector=vec, tokens=tokens, prefetch=max(query.prefetch, k))

    # -- maintenance and lifetime ------------------------------------------------------------------

    def optimize(self, name: str) -> bool:
        """Bring the collection's search structures up to date with recent writes; blocks until done and
        says whether anything changed (a server does this by itself in the background: no-op there)."""
        return self.backend.optimize(self._open(name)[0])

    def advertise(self, **fields: Any) -> None:
        """Tell other processes that find the embedded store held by this one ``fields`` (a server: the
        URL it answers at; nothing: take back what was said); nothing with a Qdrant server, which every
        process uses directly."""
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
