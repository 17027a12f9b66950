"""The embedded store: Qdrant's Rust engine in this process, through qdrant-edge-py.

Layout of a store folder::

    <path>/.lock              flock held while a process has the store open
    <path>/.owner.json        who holds it: pid, hostname, start time, command line
    <path>/<collection>/docvec.json   docvec's record of the collection (vector name, dim, distance, datatype)
    <path>/<collection>/shard/        one qdrant-edge shard (segments, WAL, edge_config.json)

One process at a time: qdrant-edge locks each shard's write-ahead log, and docvec takes a lock on the
whole folder first so that a second process is told at open time, and told who is in its way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import numpy.typing as npt

from docvec.errors import DocvecError

from .base import (
    DATATYPE,
    DISTANCE,
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
    import fcntl
except ImportError:  # pragma: no cover - Windows: the WAL lock is then the only guard
    fcntl = None  # type: ignore[assignment]

try:
    import qdrant_edge as qe
except ImportError as exc:  # pragma: no cover - exercised only without the package
    _IMPORT_ERROR: ImportError | None = exc
else:
    _IMPORT_ERROR = None

__all__ = ["EdgeStore"]

log = logging.getLogger("docvec")

_LOCK_FILE = ".lock"
_OWNER_FILE = ".owner.json"
_META_FILE = "docvec.json"
_SHARD_DIR = "shard"
# 2: float16 vectors with an int8 copy, no HNSW graph (1: float32, HNSW on optimize: earlier docvec)
_META_FORMAT = 2
_INDEXING_THRESHOLD_KB = 1000
_MAX_SEGMENT_KB = 50_000  # ~12k pages at 2048-d; 0.47 s per optimize() instead of 1.6 s, as fast a search
_FULL_SCAN_KB = 2**40  # never switch to a graph search (there is no graph)
INSTALL_HINT = "the embedded store needs qdrant-edge-py: pip install qdrant-edge-py==0.9.0"
_BUSY_ADVICE = (
    "An embedded store can be open in one process at a time: stop it, or send the work to it through "
    "its API (`docvec serve`), or use a Qdrant server (DOCVEC_QDRANT_URL)."
)


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    # Write then rename, so a crash leaves either the old file or the new one, never half of one.
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_owner(path: Path) -> dict[str, Any] | None:
    """What the process holding the store at ``path`` recorded about itself, or ``None``."""
    try:
        data = json.loads((Path(path) / _OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class EdgeStore(ClosingContext):
    """A :class:`~docvec.store.VectorStore` in a local folder, one qdrant-edge shard per collection.

    Writes go to each shard's write-ahead log before they are acknowledged, so they survive a crash of
    this process; :meth:`flush` (also run by :meth:`close`) writes segments out so reopening is fast.
    Shards are opened on first use. Opening a folder another process holds raises
    :class:`~docvec.store.StoreBusyError` naming that process.
    """

    def __init__(self, path: Path, *, batch_size: int = 256) -> None:
        """Open (creating if needed) the store folder ``path`` and take its lock."""
        if _IMPORT_ERROR is not None:
            raise StoreError(INSTALL_HINT) from _IMPORT_ERROR
        check_batch(batch_size)
        self.path = Path(path).expanduser().absolute()
        self.batch_size = batch_size
        self._shards: dict[str, qe.EdgeShard] = {}
        self._dims: dict[str, int] = {}
        self._formats: dict[str, int] = {}  # each open collection's docvec.json format
        self._lock = threading.RLock()
        self._closed = False
        # Rescoring makes the scores exact; collections without an int8 copy (older ones) ignore it.
        quantization = qe.QuantizationSearchParams(rescore=True, oversampling=OVERSAMPLING)
        self._search_params = qe.SearchParams(quantization=quantization)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store folder {self.path}: {exc}") from exc
        self._lock_fd = self._take_lock()
        self._write_owner()
        log.info("opened embedded store %s", self.path)

    # -- lock and owner record -------------------------------------------------------------------

    def _take_lock(self) -> int | None:
        if fcntl is None:  # pragma: no cover
            return None
        try:
            fd = os.open(self.path / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open the lock file in {self.path}: {exc}") from exc
        try:
            # Non-blocking: waiting for another process's store to close would hang a CLI for ever.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self._busy_error() from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot lock {self.path / _LOCK_FILE}: {exc}") from exc
        return fd

    def _write_owner(self) -> None:
        owner = {
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "cmdline": shlex.join(sys.orig_argv),
        }
        try:
            _write_json_atomic(self.path / _OWNER_FILE, owner)
        except OSError as exc:
            self._release_lock()
            raise StoreError(f"cannot write {self.path / _OWNER_FILE}: {exc}") from exc

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def _busy_error(self) -> StoreBusyError:
        owner = read_owner(self.path)
        if owner is None:
            who = f"another process (it left no readable {_OWNER_FILE})"
        else:
            cmd = str(owner.get("cmdline", "?"))
            if len(cmd) > 200:
                cmd = cmd[:197] + "..."
            who = f"process {owner.get('pid', '?')} on {owner.get('hostname', '?')}"
            if owner.get("pid") == os.getpid() and owner.get("hostname") == socket.gethostname():
                who += " (this process: another EdgeStore on this folder is still open)"
            who += f", running since {owner.get('started', '?')}: {cmd}"
        return StoreBusyError(
            f"the docvec store at {self.path} is in use by {who}. {_BUSY_ADVICE}",
            path=str(self.path),
            owner=owner,
        )

    # -- error translation -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _translate(self, name: str | None, action: str) -> Iterator[None]:
        # qdrant-edge raises plain Exception (and ValueError for bad ids) with the reason only in the text.
        try:
            yield
        except DocvecError:
            raise
        except Exception as exc:
            text = str(exc)
            if "WouldBlock" in text:
                raise self._busy_error() from exc
            where = f"collection {name!r}: " if name else ""
            raise StoreError(f"{where}{action} failed: {text}") from exc

    # -- collections -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store at {self.path} is closed")

    def _read_meta(self, name: str) -> dict[str, Any] | None:
        path = self.path / name / _META_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"collection {name!r}: cannot read {path}: {exc}") from exc
        try:
            meta = json.loads(text)
            int(meta["dim"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"collection {name!r}: {path} is not a valid collection record") from exc
        if not isinstance(meta, dict):
            raise StoreError(f"collection {name!r}: {path} is not a valid collection record")
        return meta

    def _get(self, name: str) -> tuple[qe.EdgeShard, int]:
        """The open shard of collection ``name`` and its dim, loading the shard on first use."""
        check_collection_name(name)
        with self._lock:
            self._check_open()
            shard = self._shards.get(name)
            if shard is not None:
                return shard, self._dims[name]
            meta = self._read_meta(name)
            if meta is None:
                raise CollectionNotFoundError(
                    f"collection {name!r} does not exist in {self.path} (create it with ensure_collection)"
                )
            with self._translate(name, "opening the shard"):
                shard = qe.EdgeShard.load(str(self.path / name / _SHARD_DIR))
            self._shards[name] = shard
            self._dims[name] = int(meta["dim"])
            self._formats[name] = int(meta.get("format", 1))
            return shard, self._dims[name]

    def ensure_collection(self, name: str, dim: int) -> None:
        """Create collection ``name`` (cosine vector ``"page"`` of ``dim``, keyword indexes on doc_id,
        source and tags) unless it exists; raise :class:`StoreError` if it exists with another dim."""
        check_collection_name(name)
        check_dim(dim)
        with self._lock:
            self._check_open()
            meta = self._read_meta(name)
            if meta is not None:
                if int(meta["dim"]) != dim:
                    raise StoreError(
                        f"collection {name!r} exists with {meta['dim']}-d vectors, not {dim}-d: use another "
                        f"collection name, or delete {self.path / name} to rebuild it"
                    )
                self._get(name)
                return
            self._create(name, dim)

    def _create(self, name: str, dim: int) -> None:
        shard_dir = self.path / name / _SHARD_DIR
        config = qe.EdgeConfig(
            vectors={
                VECTOR_NAME: qe.EdgeVectorParams(
                    size=dim,
                    distance=qe.Distance.Cosine,
                    datatype=qe.VectorStorageDatatype.Float16,
                    quantization_config=qe.ScalarQuantizationConfig(
                        type=qe.ScalarType.Int8, quantile=QUANTILE, memory=qe.Memory.Pinned
                    ),
                )
            },
            # No HNSW graph (m=0): the index is the int8 copy, scanned whole and rescored (see base.py).
            # On 2048-d vectors a graph took 4-5 minutes to build for 100k points and found 0.06-0.96 of
            # the true top 10, where the scan takes 0.6x the time of numpy's float32 scan and finds all.
            hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=_FULL_SCAN_KB),
            # optimize() turns the segment that takes new writes into a quantized one once it holds this
            # many KB of vectors (250 pages at 2048-d); below that an exact float16 scan is as fast. It
            # merges it into an older segment only while that stays under the max size: without one, each
            # conversion rewrote the whole collection (3 s per ingest run at 60k pages, holding the GIL).
            optimizers=qe.EdgeOptimizersConfig(
                indexing_threshold=_INDEXING_THRESHOLD_KB, max_segment_size=_MAX_SEGMENT_KB
            ),
            # A hit's payload is read on every query: on disk (the default) that cost 0.2 ms of a 0.7 ms
            # query at 1k points. Payloads are small (a few hundred bytes a page).
            payload_memory=qe.Memory.Cached,
            # One search thread: handing a query to a pool thread cost 0.1-0.15 ms per query here, a
            # quarter of a search over 1k points, and a collection has few segments to spread.
            max_search_threads=1,
        )
        with self._translate(name, "creating the collection"):
            if shard_dir.is_dir() and any(shard_dir.iterdir()):
                # A shard without docvec.json: a creation that crashed before its last step. Loading with
                # the config makes qdrant-edge check the dim against the existing segments.
                log.warning("collection %r: finishing an interrupted creation in %s", name, shard_dir)
                shard = qe.EdgeShard.load(str(shard_dir), config)
            else:
                shard_dir.parent.mkdir(parents=True, exist_ok=True)
                shard = qe.EdgeShard.create(str(shard_dir), config)
        try:
            with self._translate(name, "creating payload indexes"):
                for field in INDEXED_FIELDS:
                    shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
                shard.flush()
            # The record is written last: its presence means the collection is complete.
            meta = {
                "format": _META_FORMAT,
                "vector": VECTOR_NAME,
                "dim": dim,
                "distance": DISTANCE,
                "datatype": DATATYPE,
            }
            try:
                _write_json_atomic(self.path / name / _META_FILE, meta)
            except OSError as exc:
                raise StoreError(f"collection {name!r}: cannot write its record: {exc}") from exc
        except BaseException:
            with contextlib.suppress(Exception):
                shard.close()
            raise
        self._shards[name] = shard
        self._dims[name] = dim
        self._formats[name] = _META_FORMAT
        log.info("created collection %r (%d-d, cosine) in %s", name, dim, self.path)

    def collections(self) -> list[str]:
        """Names of the collections in this store, sorted."""
        self._check_open()
        return sorted(p.parent.name for p in self.path.glob(f"*/{_META_FILE}"))

    # -- writes ------------------------------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[Point]) -> None:
        """Insert or overwrite ``points``, ``batch_size`` per update; each batch is in the WAL when this
        returns."""
        points = list(points)
        shard, dim = self._get(name)
        check_dims(points, dim, name)
        for chunk in batches(points, self.batch_size):
            # Building the points is inside the translation too: a payload that is not JSON fails there.
            with self._translate(name, "upsert"):
                ops = [qe.Point(p.id, {VECTOR_NAME: p.vector.tolist()}, p.payload) for p in chunk]
                shard.update(qe.UpdateOperation.upsert_points(ops))
        log.debug("collection %r: upserted %d points", name, len(points))

    def delete(self, name: str, ids: Sequence[str]) -> None:
        """Delete points by id; unknown ids are ignored."""
        ids = canonical_ids(ids)
        shard, _ = self._get(name)
        for start in range(0, len(ids), 1024):
            with self._translate(name, "delete"):
                shard.update(qe.UpdateOperation.delete_points(list(ids[start : start + 1024])))

    def delete_where(self, name: str, flt: Filter) -> None:
        """Delete every point matching ``flt``; an empty filter is refused (it would delete everything)."""
        if flt.is_empty:
            raise StoreError(f"collection {name!r}: delete_where needs a filter with at least one condition")
        shard, _ = self._get(name)
        qfilter = _to_edge_filter(flt)
        assert qfilter is not None
        with self._translate(name, "delete_where"):
            shard.update(qe.UpdateOperation.delete_points_by_filter(qfilter))

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
        # Checked here, not in the generator, so that a missing collection fails at the call.
        shard, _ = self._get(name)
        qfilter = _to_edge_filter(flt)
        if with_vectors:
            return self._scroll_points(shard, name, qfilter, batch)
        return self._scroll_pairs(shard, name, qfilter, batch)

    def _pages(
        self, shard: qe.EdgeShard, name: str, qfilter: qe.Filter | None, batch: int, with_vectors: bool
    ) -> Iterator[list[qe.Record]]:
        offset: Any = None
        while True:
            request = qe.ScrollRequest(
                offset=offset,
                limit=batch,
                filter=qfilter,
                with_payload=True,
                with_vector=[VECTOR_NAME] if with_vectors else False,
            )
            with self._translate(name, "scroll"):
                records, offset = shard.scroll(request)
            yield records
            if offset is None:
                return

    def _scroll_pairs(
        self, shard: qe.EdgeShard, name: str, qfilter: qe.Filter | None, batch: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        for records in self._pages(shard, name, qfilter, batch, False):
            for r in records:
                yield str(r.id), dict(r.payload or {})

    def _scroll_points(
        self, shard: qe.EdgeShard, name: str, qfilter: qe.Filter | None, batch: int
    ) -> Iterator[Point]:
        for records in self._pages(shard, name, qfilter, batch, True):
            for r in records:
                vectors = r.vector
                if not isinstance(vectors, dict) or VECTOR_NAME not in vectors:
                    raise StoreError(f"collection {name!r}: point {r.id} has no {VECTOR_NAME!r} vector")
                vec = np.asarray(vectors[VECTOR_NAME], dtype=np.float32)
                yield Point(str(r.id), vec, dict(r.payload or {}))

    def count(self, name: str, flt: Filter | None = None) -> int:
        """Exact number of points matching ``flt`` (all points when ``None``)."""
        shard, _ = self._get(name)
        with self._translate(name, "count"):
            return int(shard.count(qe.CountRequest(exact=True, filter=_to_edge_filter(flt))))

    def facet(self, name: str, field: str) -> dict[str, int]:
        """Every value of the indexed payload ``field`` and how many points have it (exact)."""
        check_facet_field(field, name)
        shard, _ = self._get(name)
        with self._translate(name, "facet"):
            # no more distinct values than points: asking for that many returns them all
            total = int(shard.count(qe.CountRequest(exact=True)))
            found = shard.facet(qe.FacetRequest(field, limit=max(total, 1), exact=True))
        # a value whose points were all deleted stays in the index with a count of 0 until a vacuum
        return {str(h.value): int(h.count) for h in found.hits if h.count > 0}

    def search(self, name: str, vector: npt.ArrayLike, k: int, flt: Filter | None = None) -> list[Hit]:
        """The ``k`` points most similar to ``vector`` (cosine similarity), best first, among those
        matching ``flt``."""
        check_k(k, name)
        shard, dim = self._get(name)
        vec = as_query_vector(vector, dim, name)
        request = qe.QueryRequest(
            limit=k,
            query=qe.Query.Nearest(vec.tolist(), using=VECTOR_NAME),
            filter=_to_edge_filter(flt),
            with_payload=True,
            params=self._search_params,
        )
        with self._translate(name, "search"):
            found = shard.query(request)
        return [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in found]

    # -- maintenance -------------------------------------------------------------------------------

    def optimize(self, name: str) -> bool:
        """Quantize the newly written segment of collection ``name`` once it is large enough, merge small
        segments and drop deleted points; blocks until done (0.6 s for 10k 2048-d points on 2 cores,
        nothing when there is nothing to do). The ingest pipeline runs it at the end of every run.

        A collection made by an earlier docvec (float32, its optimizer builds an HNSW graph: minutes at 50k
        points) is left as it is: it searches exactly without it."""
        shard, _ = self._get(name)
        if self._formats[name] < 2:
            log.info("collection %r predates docvec's quantized layout: not optimizing it", name)
            return False
        with self._translate(name, "optimize"):
            changed = bool(shard.optimize())
            shard.flush()
        return changed

    def flush(self) -> None:
        """Write every open collection's pending changes out to its segments."""
        with self._lock:
            self._check_open()
            for name, shard in self._shards.items():
                with self._translate(name, "flush"):
                    shard.flush()

    def close(self) -> None:
        """Flush and close every open collection and release the folder; calling it again does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            first_error: StoreError | None = None
            for name, shard in self._shards.items():
                try:
                    with self._translate(name, "close"):
                        shard.flush()
                        shard.close()
                except StoreError as exc:
                    log.error("%s", exc)
                    first_error = first_error or exc
            self._shards.clear()
            # Shards are closed (their WAL locks released) before the folder lock is let go.
            with contextlib.suppress(OSError):
                (self.path / _OWNER_FILE).unlink()
            self._release_lock()
            log.info("closed embedded store %s", self.path)
            if first_error is not None:
                raise first_error

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"EdgeStore({str(self.path)!r}, {state})"


def _to_edge_filter(flt: Filter | None) -> qe.Filter | None:
    """docvec's Filter as a qdrant-edge Filter (``None`` when it has no condition).

    MatchAny, not MatchValue, even for one value: it is the same index lookup, and MatchValue has the
    boolean pitfall (it never matches stored booleans); all docvec's filter fields are keywords.
    """
    if flt is None or flt.is_empty:
        return None
    return qe.Filter(
        must=[qe.FieldCondition(key, match=qe.MatchAny(list(values))) for key, values in flt.conditions()]
    )


if TYPE_CHECKING:

    def _conforms(store: EdgeStore) -> VectorStore:
        # mypy proves here that EdgeStore implements the whole protocol.
        return store
