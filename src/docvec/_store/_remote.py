"""The server backend: a Qdrant server or cluster, through qdrant-client.

Every call goes through :meth:`RemoteBackend._call`, the one place where qdrant_client, httpx and grpc
errors become docvec store errors: transient ones (connection refused or reset, timeouts, HTTP 5xx and
429, gRPC UNAVAILABLE and the like) are retried with exponential backoff and end as
:class:`~docvec.StoreUnavailableError` naming the URL; deterministic ones (HTTP 4xx such as a wrong
dim) fail at once as :class:`~docvec.StoreError`. All operations are safe to repeat (upserts carry
deterministic ids), so reads and writes are retried alike.

qdrant-client's local mode (``path=`` a folder, or ``":memory:"``) runs the same code path without a
server; it is meant for tests (it is a pure-Python, brute-force stand-in), not for real collections.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

# A missing qdrant-client is reported by docvec._store's loader, with its install hint.
import httpx
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from .._errors import (
    CollectionNotFoundError,
    DocvecError,
    ForeignCollectionError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
)
from .._text._terms import SparseVector
from ._backend import Backend
from ._layout import LAYOUT
from ._points import Filter, Fusion, Point, Record, ScoredPoint, Scroll, Visual

__all__ = ["MEMORY", "RemoteBackend"]

log = logging.getLogger("docvec")

T = TypeVar("T")

MEMORY = ":memory:"
# docvec's record of a collection, in the collection's metadata (which a server merges key by key)
_RECORD_KEY = "docvec"

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


class RemoteBackend:
    """Collections on a Qdrant server or cluster (``url``), or on qdrant-client's local mode for tests
    (``path=`` a folder or ``":memory:"``, or ``url=":memory:"``).

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
    ) -> None:
        """Connect to ``url`` (nothing is sent until the first call), or open local mode at ``path``."""
        if (url is None) == (path is None):
            raise StoreError(
                "the server backend needs exactly one of url (a Qdrant server) or path (local mode)"
            )
        if retries < 1 or backoff < 0 or max_backoff < 0:
            raise StoreError("the server backend needs retries >= 1 and non-negative backoff times")
        self.url = url
        self.path = None if path is None or str(path) == MEMORY else Path(path)
        self.where = url if url is not None else (f"local:{self.path}" if self.path else f"local:{MEMORY}")
        self.resolves_aliases = True  # every points and collection call takes an alias
        self._local = url == MEMORY or path is not None
        self._retries = retries
        self._backoff = backoff
        self._max_backoff = max_backoff
        # Rescoring with the stored vectors makes the scores exact (see _core.Layout). Local mode scans
        # exactly and warns on every query that has search params.
        quantization = models.QuantizationSearchParams(rescore=True, oversampling=LAYOUT.oversampling)
        self._search_params = None if self._local else models.SearchParams(quantization=quantization)
        scan = models.QuantizationSearchParams(rescore=True, oversampling=LAYOUT.token_oversampling)
        self._scan_tokens = None if self._local else models.SearchParams(quantization=scan)
        rerank = models.QuantizationSearchParams(ignore=True)
        self._rerank_tokens = None if self._local else models.SearchParams(quantization=rerank)
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
            return CollectionNotFoundError(f"collection {name!r} does not exist at {self.where}")
        return StoreError(f"{where}{action} failed at {self.where}: {_describe(exc)}")

    # -- collections -------------------------------------------------------------------------------

    def collection_dim(self, name: str) -> int | None:
        """The dim of the collection's ``"page"`` vector, ``None`` if the collection does not exist; a
        collection docvec did not make (no such vector, another distance) is refused."""
        try:
            info = self._call("reading the collection", name, lambda: self._client.get_collection(name))
        except CollectionNotFoundError:
            return None
        vectors = info.config.params.vectors
        params = vectors.get(LAYOUT.vector) if isinstance(vectors, dict) else None
        if params is None:
            raise ForeignCollectionError(
                f"collection {name!r} at {self.where} was not made by docvec: "
                f"it has no {LAYOUT.vector!r} vector"
            )
        if params.distance != models.Distance.COSINE:
            raise ForeignCollectionError(
                f"collection {name!r} at {self.where} uses {params.distance} distance, docvec needs cosine"
            )
        missing = [f for f in LAYOUT.indexed_fields if f not in (info.payload_schema or {})]
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

    def create_collection(self, name: str, dim: int, tokens: int | None = None, text: bool = False) -> None:
        int8 = models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(
                type=models.ScalarType.INT8, quantile=LAYOUT.quantile, always_ram=True
            )
        )
        vectors = {
            # float16 and an int8 copy as in the embedded store (see _core.py); a server keeps its HNSW
            # graph too. Local mode ignores all three. The int8 copy is the page vector's own, not the
            # collection's: token vectors get none.
            LAYOUT.vector: models.VectorParams(
                size=dim,
                distance=models.Distance.COSINE,
                datatype=models.Datatype(LAYOUT.datatype),
                quantization_config=int8,
            )
        }
        if tokens is not None:  # see Layout.tokens: no graph; on disk, and so is their int8 copy
            vectors[LAYOUT.tokens] = models.VectorParams(
                size=tokens,
                distance=models.Distance.COSINE,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
                datatype=models.Datatype(LAYOUT.datatype),
                hnsw_config=models.HnswConfigDiff(m=0),
                on_disk=True,
                quantization_config=models.ScalarQuantization(
                    scalar=models.ScalarQuantizationConfig(
                        type=models.ScalarType.INT8, quantile=LAYOUT.quantile, always_ram=False
                    )
                ),
            )
        try:
            self._call(
                "creating the collection",
                name,
                lambda: self._client.create_collection(
                    name,
                    vectors_config=vectors,
                    # see Layout.text: Qdrant counts the document frequencies
                    sparse_vectors_config=(
                        {LAYOUT.text: models.SparseVectorParams(modifier=models.Modifier.IDF)}
                        if text
                        else None
                    ),
                ),
            )
        except StoreUnavailableError:
            raise
        except StoreError:
            # Another client (or our own retried request) may have created it meanwhile: a 409. The
            # store core compares the dims.
            if self.collection_dim(name) is None:
                raise
            return
        if not self._local:  # local mode has no payload indexes (and warns when asked for one)
            self._create_indexes(name, LAYOUT.indexed_fields)
        log.info("created collection %r (%d-d, cosine) at %s", name, dim, self.where)

    def token_dim(self, name: str) -> int | None:
        info = self._call("reading the collection", name, lambda: self._client.get_collection(name))
        vectors = info.config.params.vectors
        params = vectors.get(LAYOUT.tokens) if isinstance(vectors, dict) else None
        return int(params.size) if params is not None else None

    def has_text(self, name: str) -> bool:
        info = self._call("reading the collection", name, lambda: self._client.get_collection(name))
        return LAYOUT.text in (info.config.params.sparse_vectors or {})

    def collections(self) -> list[str]:
        response = self._call("listing collections", None, self._client.get_collections)
        return [c.name for c in response.collections]

    def drop_collection(self, name: str) -> None:
        self._call("dropping the collection", name, partial(self._client.delete_collection, name))
        log.info("dropped collection %r at %s", name, self.where)

    def advertise(self, fields: dict[str, Any]) -> None:
        """Nothing to do: a Qdrant server takes every process's work itself."""

    # -- aliases and records -----------------------------------------------------------------------

    def aliases(self) -> dict[str, str]:
        response = self._call("listing aliases", None, self._client.get_aliases)
        return {a.alias_name: a.collection_name for a in response.aliases}

    def set_alias(self, alias: str, collection: str) -> None:
        """Switch in one request (Qdrant applies a list of alias operations atomically). A collection made
        before versions holds the alias's name, which an alias cannot share: it is dropped first, and
        searches in the instant between find nothing (docvec's API retries them)."""
        if alias in self.collections():
            log.warning(
                "collection %r at %s predates versions: dropping it so that its name can point at %r "
                "(Qdrant has no rename, and an alias cannot share a collection's name)",
                *(alias, self.where, collection),
            )
            self.drop_collection(alias)
        operations: list[models.AliasOperations] = []
        if alias in self.aliases():
            operations.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
        create = models.CreateAlias(collection_name=collection, alias_name=alias)
        operations.append(models.CreateAliasOperation(create_alias=create))
        self._call("switching the alias", alias, partial(self._client.update_collection_aliases, operations))
        log.debug("collection %r now reads %r at %s", alias, collection, self.where)

    def read_record(self, name: str) -> dict[str, Any] | None:
        try:
            info = self._call("reading the collection", name, lambda: self._client.get_collection(name))
        except CollectionNotFoundError:
            return None
        record = (info.config.metadata or {}).get(_RECORD_KEY)
        return record if isinstance(record, dict) else None

    def write_record(self, name: str, record: dict[str, Any]) -> None:
        self._call(
            "recording the collection",
            name,
            lambda: self._client.update_collection(name, metadata={_RECORD_KEY: record}),
        )

    # -- writes ------------------------------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[Point]) -> None:
        """One batch, acknowledged (``wait=True``) before this returns."""
        # The structs are built inside the call so that a payload pydantic rejects is translated too.
        self._call("upsert", name, partial(self._upsert_batch, name, points))

    def _upsert_batch(self, name: str, points: Sequence[Point]) -> None:
        structs = []
        for p in points:
            vectors: dict[str, Any] = {LAYOUT.vector: p.vector.tolist()}
            if p.tokens is not None:
                vectors[LAYOUT.tokens] = p.tokens.tolist()
            if p.terms is not None and p.terms.indices:
                vectors[LAYOUT.text] = models.SparseVector(indices=p.terms.indices, values=p.terms.values)
            structs.append(models.PointStruct(id=p.id, vector=vectors, payload=p.payload))
        self._client.upsert(name, structs, wait=True)

    def delete(self, name: str, ids: Sequence[str]) -> None:
        selector = models.PointIdsList(points=list(ids))
        self._call("delete", name, partial(self._client.delete, name, selector, wait=True))

    def delete_where(self, name: str, flt: Filter) -> None:
        selector = _required_selector(name, flt)
        self._call("delete_where", name, lambda: self._client.delete(name, selector, wait=True))

    def set_payload(self, name: str, flt: Filter, payload: dict[str, Any]) -> None:
        selector = _required_selector(name, flt)
        self._call(
            "set_payload", name, lambda: self._client.set_payload(name, payload, points=selector, wait=True)
        )

    # -- reads -------------------------------------------------------------------------------------

    def scroll(self, name: str, page: Scroll, offset: Any) -> tuple[list[Record], Any]:
        request = partial(
            self._client.scroll,
            name,
            scroll_filter=_to_client_filter(page.flt),
            limit=page.limit,
            offset=offset,
            with_payload=models.PayloadSelectorExclude(exclude=list(page.without)) if page.without else True,
            with_vectors=list(page.vectors) if page.vectors else False,
        )
        records, next_offset = self._call("scroll", name, request)
        out = [
            Record(str(r.id), dict(r.payload or {}), r.vector if isinstance(r.vector, dict) else None)
            for r in records
        ]
        return out, next_offset

    def count(self, name: str, flt: Filter | None) -> int:
        qfilter = _to_client_filter(flt)
        result = self._call("count", name, lambda: self._client.count(name, count_filter=qfilter, exact=True))
        return int(result.count)

    def facet(self, name: str, field: str, limit: int) -> dict[str, int]:
        response = self._call(
            "facet", name, lambda: self._client.facet(name, key=field, limit=limit, exact=True)
        )
        found = {str(h.value): int(h.count) for h in response.hits if h.count > 0}
        if field == "doc_id" and self._local:
            # local mode reads any value that parses as a UUID as one, and gives it back hyphenated: a doc
            # id (32 hex digits) comes back as 8-4-4-4-12; a server's keyword index gives it as stored
            found = {k.replace("-", "") if len(k) == 36 else k: n for k, n in found.items()}
        return found

    def search(self, name: str, visual: Visual, k: int, flt: Filter | None) -> list[ScoredPoint]:
        qfilter = _to_client_filter(flt)
        query, using, first, params = self._visual(visual, qfilter)
        return self._query(
            name,
            query=query,
            using=using,
            prefetch=first,
            query_filter=qfilter,
            limit=k,
            search_params=params,
        )

    def search_text(
        self, name: str, terms: SparseVector, k: int, flt: Filter | None, fusion: Fusion | None
    ) -> list[ScoredPoint]:
        qfilter = _to_client_filter(flt)
        keyword = models.SparseVector(indices=terms.indices, values=terms.values)
        if fusion is None:
            return self._query(name, query=keyword, using=LAYOUT.text, query_filter=qfilter, limit=k)
        query, using, first, params = self._visual(fusion.visual, qfilter)
        stages = [
            models.Prefetch(
                query=query, using=using, prefetch=first, limit=fusion.depth, filter=qfilter, params=params
            ),
            models.Prefetch(query=keyword, using=LAYOUT.text, limit=fusion.depth, filter=qfilter),
        ]
        return self._query(
            name,
            prefetch=stages,
            query=models.RrfQuery(rrf=models.Rrf(k=LAYOUT.rrf_k, weights=[1.0, fusion.weight])),
            query_filter=qfilter,
            limit=k,
        )

    def _visual(
        self, visual: Visual, qfilter: models.Filter | None
    ) -> tuple[list[Any], str, models.Prefetch | None, models.SearchParams | None]:
        """A visual query as the client takes it, for a search or a fused search's visual stage alike: the
        query, the vector it uses, the prefetch it reranks (MaxSim over a dense vector's best points) and
        its search parameters."""
        if visual.tokens is None:
            assert visual.vector is not None
            return visual.vector.tolist(), LAYOUT.vector, None, self._search_params
        first = None
        if visual.vector is not None and visual.prefetch is not None:
            first = models.Prefetch(
                query=visual.vector.tolist(),
                using=LAYOUT.vector,
                limit=visual.prefetch,
                filter=qfilter,
                params=self._search_params,
            )
        params = self._scan_tokens if first is None else self._rerank_tokens
        return visual.tokens.tolist(), LAYOUT.tokens, first, params

    def _query(self, name: str, **request: Any) -> list[ScoredPoint]:
        response = self._call(
            "search", name, lambda: self._client.query_points(name, with_payload=True, **request)
        )
        return [ScoredPoint(str(p.id), float(p.score), dict(p.payload or {})) for p in response.points]

    # -- lifetime ----------------------------------------------------------------------------------

    def optimize(self, name: str) -> bool:
        """Nothing to do: a Qdrant server indexes and merges segments in the background."""
        return False

    def flush(self) -> None:
        """Nothing to do: every write waited for the server's acknowledgement (``wait=True``)."""

    def close(self) -> None:
        """Close the client's connections (or local files)."""
        try:
            self._client.close()
        except Exception as exc:
            raise StoreError(f"closing {self.where} failed: {_describe(exc)}") from exc


def _required_selector(name: str, flt: Filter) -> models.FilterSelector:
    qfilter = _to_client_filter(flt)
    if qfilter is None or flt.is_empty:  # the core refuses this first: never touch every point by accident
        raise StoreError(f"collection {name!r}: this operation needs a filter with a condition")
    return models.FilterSelector(filter=qfilter)


def _to_client_filter(flt: Filter | None) -> models.Filter | None:
    """docvec's Filter as a qdrant-client Filter (``None`` when it has no condition)."""
    if flt is None or not (flt.conditions() or flt.exclusions()):
        return None
    return models.Filter(
        must=[
            models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))
            for key, values in flt.conditions()
        ]
        or None,
        must_not=[
            models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))
            for key, values in flt.exclusions()
        ]
        or None,
    )


if TYPE_CHECKING:

    def _conforms(backend: RemoteBackend) -> Backend:
        # mypy proves here that RemoteBackend implements the whole protocol.
        return backend
