"""A Qdrant server or cluster as the store, through qdrant-client.

Every call goes through :meth:`RemoteStore._call`, the one place where qdrant_client, httpx and grpc
errors become docvec store errors: transient ones (connection refused or reset, timeouts, HTTP 5xx and
429, gRPC UNAVAILABLE and the like) are retried with exponential backoff and end as
:class:`~docvec.store.StoreUnavailableError` naming the URL; deterministic ones (HTTP 4xx such as a wrong
dim) fail at once as :class:`~docvec.store.StoreError`. All operations are safe to repeat (upserts carry
deterministic ids), so reads and writes are retried alike.

qdrant-client's local mode (``path=`` a folder, or ``":memory:"``) runs the same code path without a
server; it is meant for tests (it is a pure-Python, brute-force stand-in), not for real collections.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import numpy as np
import numpy.typing as npt

from docvec.errors import DocvecError

from .base import (
    DATATYPE,
    INDEXED_FIELDS,
    OVERSAMPLING,
    QUANTILE,
    VECTOR_NAME,
    ClosingContext,
    CollectionNotFoundError,
    Filter,
    Hit,
    Point,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    VectorStore,
    as_query_vector,
    batches,
    canonical_ids,
    check_batch,
    check_collection_name,
    check_dim,
    check_dims,
    check_facet_field,
    check_k,
)

try:
    import httpx
    from qdrant_client import QdrantClient, models
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
except ImportError as exc:  # pragma: no cover - exercised only without the package
    _IMPORT_ERROR: ImportError | None = exc
else:
    _IMPORT_ERROR = None

__all__ = ["RemoteStore"]

log = logging.getLogger("docvec")

T = TypeVar("T")

INSTALL_HINT = "a Qdrant server store needs qdrant-client: pip install 'docvec[server]'"
MEMORY = ":memory:"

# HTTP statuses worth another try: the server or a proxy in front of it is overloaded or restarting.
_TRANSIENT_HTTP = frozenset({408, 429, 500, 502, 503, 504})
# gRPC codes with the same meaning (only seen with prefer_grpc, which docvec does not set by default).
_TRANSIENT_GRPC = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED"})


def _grpc_code(exc: BaseException) -> str | None:
    # grpc is imported by qdrant_client only when gRPC is used; look for it without importing it.
    grpc = sys.modules.get("grpc")
    if grpc is None or not isinstance(exc, grpc.RpcError):
        return None
    code = getattr(exc, "code", None)
    try:
        return str(code().name) if callable(code) else None
    except Exception:
        return None


def _is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is worth retrying: the server may answer the same request next time."""
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code is None or exc.status_code in _TRANSIENT_HTTP
    if isinstance(exc, ResponseHandlingException):
        # Wraps what httpx raised while sending, or a response that failed to parse (not transient).
        return _is_transient(exc.source)
    if isinstance(exc, httpx.TransportError | ConnectionError | TimeoutError):
        return True
    code = _grpc_code(exc)
    return code is not None and code in _TRANSIENT_GRPC


def _status(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, UnexpectedResponse) else None


def _describe(exc: BaseException) -> str:
    """A one-line reason: Qdrant's own error text where the response has one."""
    if isinstance(exc, UnexpectedResponse):
        detail = exc.content.decode("utf-8", "replace")
        try:
            detail = str(json.loads(detail)["status"]["error"])
        except (ValueError, KeyError, TypeError):
            detail = detail[:300]
        return f"HTTP {exc.status_code} {exc.reason_phrase}: {detail}".strip()
    if isinstance(exc, ResponseHandlingException):
        return _describe(exc.source)
    code = _grpc_code(exc)
    if code is not None:
        details = getattr(exc, "details", None)
        return f"gRPC {code}: {details() if callable(details) else exc}"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


class RemoteStore(ClosingContext):
    """A :class:`~docvec.store.VectorStore` on a Qdrant server or cluster (``url``), or on qdrant-client's
    local mode for tests (``path=`` a folder or ``":memory:"``, or ``url=":memory:"``).

    ``retries`` is the number of tries of each call on transient errors, with a pause of ``backoff``
    seconds after the first failure, doubling up to ``max_backoff``.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        path: Path | str | None = None,
        timeout: float = 30.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        batch_size: int = 256,
    ) -> None:
        """Connect to ``url`` (nothing is sent until the first call), or open local mode at ``path``."""
        if _IMPORT_ERROR is not None:
            raise StoreError(INSTALL_HINT) from _IMPORT_ERROR
        if (url is None) == (path is None):
            raise StoreError("RemoteStore needs exactly one of url (a Qdrant server) or path (local mode)")
        if retries < 1 or backoff < 0 or max_backoff < 0:
            raise StoreError("RemoteStore needs retries >= 1 and non-negative backoff times")
        check_batch(batch_size)
        self.url = url
        self.path = None if path is None or str(path) == MEMORY else Path(path)
        self.where = url if url is not None else (f"local:{self.path}" if self.path else f"local:{MEMORY}")
        self.batch_size = batch_size
        self._local = url == MEMORY or path is not None
        self._retries = retries
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._dims: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False
        # Rescoring with the stored vectors makes the scores exact (see base.QUANTILE). Local mode scans
        # exactly and warns on every query that has search params.
        quantization = models.QuantizationSearchParams(rescore=True, oversampling=OVERSAMPLING)
        self._search_params = None if self._local else models.SearchParams(quantization=quantization)
        try:
            if url == MEMORY or (path is not None and str(path) == MEMORY):
                self._client = QdrantClient(location=MEMORY)
            elif url is not None:
                # check_compatibility would send a request now; the first real call tells the same.
                self._client = QdrantClient(
                    url=url, api_key=api_key, timeout=int(timeout + 0.999), check_compatibility=False
                )
            else:
                assert self.path is not None
                self.path.mkdir(parents=True, exist_ok=True)
                self._client = QdrantClient(path=str(self.path))
        except RuntimeError as exc:
            if "already accessed" in str(exc):
                raise StoreBusyError(
                    f"the local Qdrant folder {self.path} is in use by another client: {exc}",
                    path=str(self.path),
                ) from exc
            raise StoreError(f"cannot open {self.where}: {_describe(exc)}") from exc
        except Exception as exc:
            raise StoreError(f"cannot open {self.where}: {_describe(exc)}") from exc
        log.info("using Qdrant at %s", self.where)

    # -- the boundary ------------------------------------------------------------------------------

    def _call(self, action: str, name: str | None, fn: Callable[[], T]) -> T:
        """Run ``fn``, retrying transient failures, and translate whatever it raises."""
        if self._closed:
            raise StoreError(f"the store at {self.where} is closed")
        where = f"collection {name!r}: " if name else ""
        delay = self._backoff
        for attempt in range(1, self._retries + 1):
            try:
                return fn()
            except DocvecError:
                raise
            except Exception as exc:
                if not _is_transient(exc):
                    raise self._deterministic(exc, action, name) from exc
                if attempt == self._retries:
                    raise StoreUnavailableError(
                        f"Qdrant at {self.where} is unavailable: {where}{action} failed {attempt} times; "
                        f"last error: {_describe(exc)}",
                        url=self.where,
                        attempts=attempt,
                    ) from exc
                # Jitter keeps many clients that failed together from retrying in lockstep.
                pause = delay * random.uniform(0.75, 1.25)
                log.warning(
                    "Qdrant at %s: %s%s failed (%s), try %d of %d; retrying in %.2f s",
                    *(self.where, where, action, _describe(exc), attempt, self._retries, pause),
                )
                time.sleep(pause)
                delay = min(delay * 2, self._max_backoff)
        raise AssertionError("unreachable")  # pragma: no cover

    def _deterministic(self, exc: Exception, action: str, name: str | None) -> StoreError:
        where = f"collection {name!r}: " if name else ""
        text = str(exc)
        # A server answers 404 for a missing collection; local mode raises ValueError("... not found").
        missing = _status(exc) == 404 or (isinstance(exc, ValueError) and "not found" in text)
        if missing and name is not None:
            return CollectionNotFoundError(
                f"collection {name!r} does not exist at {self.where} (create it with ensure_collection)"
            )
        return StoreError(f"{where}{action} failed at {self.where}: {_describe(exc)}")

    # -- collections -------------------------------------------------------------------------------

    def _collection_dim(self, name: str) -> int | None:
        """The dim of collection ``name``'s ``"page"`` vector, ``None`` if the collection does not exist."""
        try:
            info = self._call("reading the collection", name, lambda: self._client.get_collection(name))
        except CollectionNotFoundError:
            return None
        vectors = info.config.params.vectors
        params = vectors.get(VECTOR_NAME) if isinstance(vectors, dict) else None
        if params is None:
            raise StoreError(
                f"collection {name!r} at {self.where} was not made by docvec: "
                f"it has no {VECTOR_NAME!r} vector"
            )
        if params.distance != models.Distance.COSINE:
            raise StoreError(
                f"collection {name!r} at {self.where} uses {params.distance} distance, docvec needs cosine"
            )
        missing = [f for f in INDEXED_FIELDS if f not in (info.payload_schema or {})]
        if missing and not self._local:
            # Heals a collection made elsewhere or interrupted between creation and indexing.
            self._create_indexes(name, missing)
        return int(params.size)

    def _create_indexes(self, name: str, fields: Sequence[str]) -> None:
        for field in fields:
            self._call(f"creating the {field!r} index", name, partial(self._create_index, name, field))

    def _create_index(self, name: str, field: str) -> None:
        self._client.create_payload_index(
            name, field, field_schema=models.PayloadSchemaType.KEYWORD, wait=True
        )

    def _dim(self, name: str) -> int:
        check_collection_name(name)
        dim = self._dims.get(name)
        if dim is None:
            dim = self._collection_dim(name)
            if dim is None:
                raise CollectionNotFoundError(
                    f"collection {name!r} does not exist at {self.where} (create it with ensure_collection)"
                )
            with self._lock:
                self._dims[name] = dim
        return dim

    def ensure_collection(self, name: str, dim: int) -> None:
        """Create collection ``name`` (cosine vector ``"page"`` of ``dim``, keyword indexes on doc_id,
        source and tags) unless it exists; raise :class:`StoreError` if it exists with another dim."""
        check_collection_name(name)
        check_dim(dim)
        existing = self._collection_dim(name)
        if existing is None:
            try:
                self._call(
                    "creating the collection",
                    name,
                    lambda: self._client.create_collection(
                        name,
                        vectors_config={
                            # float16 and an int8 copy as in the embedded store (see base.py); a server
                            # keeps its HNSW graph too. Local mode ignores all three.
                            VECTOR_NAME: models.VectorParams(
                                size=dim, distance=models.Distance.COSINE, datatype=models.Datatype(DATATYPE)
                            )
                        },
                        quantization_config=models.ScalarQuantization(
                            scalar=models.ScalarQuantizationConfig(
                                type=models.ScalarType.INT8, quantile=QUANTILE, always_ram=True
                            )
                        ),
                    ),
                )
            except StoreUnavailableError:
                raise
            except StoreError:
                # Another client (or our own retried request) may have created it meanwhile: a 409.
                existing = self._collection_dim(name)
                if existing is None:
                    raise
            else:
                if not self._local:  # local mode has no payload indexes (and warns when asked for one)
                    self._create_indexes(name, INDEXED_FIELDS)
                log.info("created collection %r (%d-d, cosine) at %s", name, dim, self.where)
        if existing is not None and existing != dim:
            raise StoreError(
                f"collection {name!r} exists at {self.where} with {existing}-d vectors, not {dim}-d: "
                "use another collection name, or delete it to rebuild it"
            )
        with self._lock:
            self._dims[name] = dim

    def collections(self) -> list[str]:
        """Names of the collections on the server, sorted."""
        response = self._call("listing collections", None, self._client.get_collections)
        return sorted(c.name for c in response.collections)

    # -- writes ------------------------------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[Point]) -> None:
        """Insert or overwrite ``points``, ``batch_size`` per request, each acknowledged (``wait=True``)
        before the next is sent."""
        points = list(points)
        dim = self._dim(name)
        check_dims(points, dim, name)
        for chunk in batches(points, self.batch_size):
            # The structs are built inside the call so that a payload pydantic rejects is translated too.
            self._call("upsert", name, partial(self._upsert_batch, name, chunk))
        log.debug("collection %r: upserted %d points", name, len(points))

    def _upsert_batch(self, name: str, chunk: Sequence[Point]) -> None:
        structs = [
            models.PointStruct(id=p.id, vector={VECTOR_NAME: p.vector.tolist()}, payload=p.payload)
            for p in chunk
        ]
        self._client.upsert(name, structs, wait=True)

    def delete(self, name: str, ids: Sequence[str]) -> None:
        """Delete points by id; unknown ids are ignored."""
        ids = canonical_ids(ids)
        self._dim(name)
        for start in range(0, len(ids), 1024):
            selector = models.PointIdsList(points=list(ids[start : start + 1024]))
            self._call("delete", name, partial(self._client.delete, name, selector, wait=True))

    def delete_where(self, name: str, flt: Filter) -> None:
        """Delete every point matching ``flt``; an empty filter is refused (it would delete everything)."""
        if flt.is_empty:
            raise StoreError(f"collection {name!r}: delete_where needs a filter with at least one condition")
        self._dim(name)
        qfilter = _to_client_filter(flt)
        assert qfilter is not None
        selector = models.FilterSelector(filter=qfilter)
        self._call("delete_where", name, lambda: self._client.delete(name, selector, wait=True))

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
        """Iterate over the points matching ``flt``: ``(id, payload)``, or :class:`Point` when
        ``with_vectors`` (vectors come back unit-length: cosine collections store them normalised)."""
        check_batch(batch)
        self._dim(name)  # a missing collection fails at the call, not at the first next()
        qfilter = _to_client_filter(flt)
        if with_vectors:
            return self._scroll_points(name, qfilter, batch)
        return self._scroll_pairs(name, qfilter, batch)

    def _pages(
        self, name: str, qfilter: models.Filter | None, batch: int, with_vectors: bool
    ) -> Iterator[list[models.Record]]:
        offset: Any = None
        while True:
            request = partial(
                self._client.scroll,
                name,
                scroll_filter=qfilter,
                limit=batch,
                offset=offset,
                with_payload=True,
                with_vectors=[VECTOR_NAME] if with_vectors else False,
            )
            records, offset = self._call("scroll", name, request)
            yield records
            if offset is None:
                return

    def _scroll_pairs(
        self, name: str, qfilter: models.Filter | None, batch: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        for records in self._pages(name, qfilter, batch, False):
            for r in records:
                yield str(r.id), dict(r.payload or {})

    def _scroll_points(self, name: str, qfilter: models.Filter | None, batch: int) -> Iterator[Point]:
        for records in self._pages(name, qfilter, batch, True):
            for r in records:
                vectors = r.vector
                if not isinstance(vectors, dict) or VECTOR_NAME not in vectors:
                    raise StoreError(f"collection {name!r}: point {r.id} has no {VECTOR_NAME!r} vector")
                vec = np.asarray(vectors[VECTOR_NAME], dtype=np.float32)
                yield Point(str(r.id), vec, dict(r.payload or {}))

    def count(self, name: str, flt: Filter | None = None) -> int:
        """Exact number of points matching ``flt`` (all points when ``None``)."""
        self._dim(name)
        qfilter = _to_client_filter(flt)
        result = self._call("count", name, lambda: self._client.count(name, count_filter=qfilter, exact=True))
        return int(result.count)

    def facet(self, name: str, field: str) -> dict[str, int]:
        """Every value of the indexed payload ``field`` and how many points have it (exact)."""
        check_facet_field(field, name)
        self._dim(name)
        # no more distinct values than points: asking for that many returns them all
        total = max(self.count(name), 1)
        response = self._call(
            "facet", name, lambda: self._client.facet(name, key=field, limit=total, exact=True)
        )
        return {str(h.value): int(h.count) for h in response.hits if h.count > 0}

    def search(self, name: str, vector: npt.ArrayLike, k: int, flt: Filter | None = None) -> list[Hit]:
        """The ``k`` points most similar to ``vector`` (cosine similarity), best first, among those
        matching ``flt``."""
        check_k(k, name)
        vec = as_query_vector(vector, self._dim(name), name)
        qfilter = _to_client_filter(flt)
        response = self._call(
            "search",
            name,
            lambda: self._client.query_points(
                name,
                query=vec.tolist(),
                using=VECTOR_NAME,
                query_filter=qfilter,
                limit=k,
                with_payload=True,
                search_params=self._search_params,
            ),
        )
        return [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in response.points]

    # -- lifetime ----------------------------------------------------------------------------------

    def optimize(self, name: str) -> bool:
        """Nothing to do: a Qdrant server indexes and merges segments in the background."""
        self._dim(name)  # a missing collection still fails here, as in the embedded store
        return False

    def flush(self) -> None:
        """Nothing to do: every write waited for the server's acknowledgement (``wait=True``)."""
        if self._closed:
            raise StoreError(f"the store at {self.where} is closed")

    def close(self) -> None:
        """Close the client's connections (or local files); calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            self._client.close()
        except Exception as exc:
            raise StoreError(f"closing {self.where} failed: {_describe(exc)}") from exc

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"RemoteStore({self.where!r}, {state})"


def _to_client_filter(flt: Filter | None) -> models.Filter | None:
    """docvec's Filter as a qdrant-client Filter (``None`` when it has no condition)."""
    if flt is None or flt.is_empty:
        return None
    return models.Filter(
        must=[
            models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))
            for key, values in flt.conditions()
        ]
    )


if TYPE_CHECKING:

    def _conforms(store: RemoteStore) -> VectorStore:
        # mypy proves here that RemoteStore implements the whole protocol.
        return store
