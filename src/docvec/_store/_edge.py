"""The embedded backend: Qdrant's Rust engine in this process, through qdrant-edge-py.

Layout of a store folder::

    <path>/.lock              flock held while a process has the store open (docvec._store._owner)
    <path>/.owner.json        who holds it: pid, hostname, start time, command line
    <path>/aliases.json       each collection name and the version it points at (see docvec._store._core)
    <path>/<collection>/docvec.json   docvec's record of the collection (vector name, dim, distance,
                                      datatype; and what made its vectors, under "record")
    <path>/<collection>/shard/        one qdrant-edge shard (segments, WAL, edge_config.json)

One process at a time: qdrant-edge locks each shard's write-ahead log, and docvec takes a lock on the
whole folder first so that a second process is told at open time, and told who is in its way.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import qdrant_edge as qe  # a missing package is reported by docvec._store's loader, with its install hint

from .._errors import CollectionNotFoundError, DiskFullError, DocvecError, StoreError
from .._fileio import MB, check_free_space, disk_free, fsync_dir, unallocated, write_json_atomic
from .._text._terms import SparseVector
from ._backend import Backend
from ._layout import LAYOUT
from ._owner import OwnerLock
from ._points import Filter, Fusion, Point, Record, ScoredPoint, Scroll, Visual

__all__ = ["EdgeBackend"]

log = logging.getLogger("docvec")

_META_FILE = "docvec.json"
_ALIASES_FILE = "aliases.json"
_SHARD_DIR = "shard"
# 2: float16 vectors with an int8 copy, no HNSW graph (1: float32, HNSW on optimize: earlier docvec)
_META_FORMAT = 2
_INDEXING_THRESHOLD_KB = 1000
_MAX_SEGMENT_KB = 50_000  # ~12k pages at 2048-d; 0.47 s per optimize() instead of 1.6 s, as fast a search
_FULL_SCAN_KB = 2**40  # never switch to a graph search (there is no graph)
# What qdrant-edge allocates at once (measured on tmpfs, which allocates a file's holes as soon as a mapping
# reads them: the worst case): creating a collection maps 41 MB of files (write-ahead log, payload storage
# and indexes), and a growing collection adds 32 MB chunks. Each write is checked for its room before it is
# taken, on top of the reserve; reading is not held to the reserve (see _load).
_OPEN_ROOM = 64 << 20
_CHUNK_ROOM = 40 << 20
_SMALL_WRITE = 1 << 20  # room a delete or a payload update needs in the write-ahead log
# Loading a shard rewrites its config file and replays what its write-ahead log holds beyond the segments,
# and a flush appends to the id tracker and sets bitmaps: each takes well under this (docs/operations.md,
# "A full disk", has the measured numbers).
_LOAD_ROOM = 1 << 20
_FLUSH_ROOM = 4 << 20
# A trial load, in a child process: on a disk too full for it, the child dies of SIGBUS, not this process.
_TRIAL_LOAD = "import sys, qdrant_edge; qdrant_edge.EdgeShard.load(sys.argv[1]).close()"
_NO_ROOM = ("No space left on device", "os error 28")  # ENOSPC, as qdrant-edge words it


class EdgeBackend:
    """Collections in a local folder, one qdrant-edge shard each (see the module's docstring).

    Writes go to each shard's write-ahead log before they are acknowledged, so they survive a crash of
    this process; :meth:`flush` (also run by :meth:`close`) writes segments out so reopening is fast.
    Shards are opened on first use. Opening a folder another process holds raises
    :class:`~docvec.StoreBusyError` naming that process.
    """

    def __init__(self, path: Path, *, reserve: int = 0, create: bool = True) -> None:
        """Open the store folder ``path`` and take its lock. A folder that does not exist yet is created
        now, or with ``create=False`` by the first collection created in it (so that reading a store that
        is not there leaves no trace; the lock is taken then).

        ``reserve`` is the free space (bytes) to keep on the folder's disk: a write that would leave less
        raises :class:`~docvec.DiskFullError` instead. The store's files are memory-mapped and grow as they
        are written, so a full disk would otherwise kill the process with SIGBUS, mid-write. Reading is not
        held to it: opening a collection needs only the room loading takes (see :meth:`_load`).
        """
        self.path = Path(path).expanduser().absolute()
        self.reserve = reserve
        self.where = str(self.path)
        self.resolves_aliases = False
        self._aliases: dict[str, str] | None = None  # read on first use; this process owns the folder
        self._shards: dict[str, qe.EdgeShard] = {}
        self._formats: dict[str, int] = {}  # each open collection's docvec.json format
        self._dims: dict[str, int] = {}
        self._wrote = False  # whether this process changed a collection (its close must write them out)
        self._lock = threading.RLock()
        # Rescoring makes the scores exact; collections without an int8 copy (older ones) ignore it.
        quantization = qe.QuantizationSearchParams(rescore=True, oversampling=LAYOUT.oversampling)
        self._search_params = qe.SearchParams(quantization=quantization)
        # Token vectors (see Layout.tokens): an exhaustive MaxSim scans their int8 copy and rescores; a
        # rerank of prefetched pages reads the float16 tokens. Older multi-vector collections have no copy.
        self._scan_tokens = qe.SearchParams(
            quantization=qe.QuantizationSearchParams(rescore=True, oversampling=LAYOUT.token_oversampling)
        )
        self._rerank_tokens = qe.SearchParams(quantization=qe.QuantizationSearchParams(ignore=True))
        self._owner = OwnerLock(self.path)
        if create or self.path.exists():
            self._own()
        log.info("opened embedded store %s", self.path)

    def _own(self) -> None:
        """Take the folder (created if needed) for this process, once."""
        self._owner.acquire()

    def advertise(self, fields: dict[str, Any]) -> None:
        """Add ``fields`` to the owner record (see :class:`~docvec._store._owner.OwnerLock`)."""
        self._owner.advertise(fields)

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
                raise self._owner.busy_error() from exc
            where = f"collection {name!r}: " if name else ""
            if any(words in text for words in _NO_ROOM):
                free = disk_free(self.path)
                raise DiskFullError(
                    f"{where}{action} failed: the disk of {self.path} is full ({free / MB:.1f} MB free); "
                    "what was written before is kept (the write-ahead log holds what is not written out "
                    "yet, and the next open replays it). Free some space and run the same command again.",
                    path=str(self.path),
                    needed=0,  # not known: qdrant-edge does not say
                    free=free,
                ) from exc
            raise StoreError(f"{where}{action} failed: {text}") from exc

    # -- collections -------------------------------------------------------------------------------

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

    def collection_dim(self, name: str) -> int | None:
        """The collection's dim from its record, loading its shard on first use; ``None`` if it has no
        record (not created, or a creation that did not finish)."""
        with self._lock:
            meta = self._read_meta(name)
            if meta is None:
                return None
            if name not in self._shards:
                self._shards[name] = self._load(name)
                self._formats[name] = int(meta.get("format", 1))
                self._dims[name] = int(meta["dim"])
            return int(meta["dim"])

    def _load(self, name: str) -> qe.EdgeShard:
        """Load a collection's shard, to read it or to write it: not held to the reserve (each write is),
        only to the room loading takes. Raises :class:`~docvec.DiskFullError` when the disk lacks it.

        Loading maps the segments' files and reads most of them whole: where the file system allocates a
        file's holes as a mapping reads them (tmpfs), that takes up to their unallocated part, elsewhere
        nothing (docs/operations.md, "A full disk"). With less free than that bound, the load is tried in a
        child process first: one that runs out of room dies of SIGBUS, and it dies instead of this one;
        one that loads leaves what it allocated allocated, so this load needs no more.
        """
        shard_dir = self.path / name / _SHARD_DIR
        needed = _LOAD_ROOM + unallocated(shard_dir / "segments")
        free = disk_free(self.path)
        if free < needed and not _loads_in_a_child(shard_dir):
            raise DiskFullError(
                f"not enough free space in {self.path} to open collection {name!r}, even to read it: "
                f"loading it maps its files and rewrites one, which takes up to {needed / MB:.1f} MB on "
                f"this disk, and {free / MB:.1f} MB is free; nothing was changed. Free some space and run "
                "the same command again.",
                path=str(self.path),
                needed=needed,
                free=free,
            )
        with self._translate(name, "opening the shard"):
            return qe.EdgeShard.load(str(shard_dir))

    def _shard(self, name: str) -> qe.EdgeShard:
        with self._lock:
            shard = self._shards.get(name)
            if shard is None and name in self._dims:  # loading it again was refused (see _reload): retry
                self.collection_dim(name)
                shard = self._shards.get(name)
        if shard is None:  # the core checked the collection exists, which loads it
            raise StoreError(f"collection {name!r}: its shard is not open")
        return shard

    def _check_space(self, needed: int, what: str, *, reserve: int | None = None) -> None:
        check_free_space(self.path, needed, self.reserve if reserve is None else reserve, what)

    def create_collection(self, name: str, dim: int, tokens: int | None = None, text: bool = False) -> None:
        """Create the shard, its payload indexes, then the record that marks the collection complete."""
        self._own()
        self._check_space(_OPEN_ROOM, f"creating collection {name!r}")
        shard_dir = self.path / name / _SHARD_DIR
        vectors = {
            LAYOUT.vector: qe.EdgeVectorParams(
                size=dim,
                distance=qe.Distance.Cosine,
                datatype=qe.VectorStorageDatatype.Float16,
                quantization_config=qe.ScalarQuantizationConfig(
                    type=qe.ScalarType.Int8, quantile=LAYOUT.quantile, memory=qe.Memory.Pinned
                ),
            )
        }
        if tokens is not None:  # see Layout.tokens
            vectors[LAYOUT.tokens] = qe.EdgeVectorParams(
                size=tokens,
                distance=qe.Distance.Cosine,
                multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
                datatype=qe.VectorStorageDatatype.Float16,
                hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=_FULL_SCAN_KB),
                memory=qe.Memory.Cached,
                quantization_config=qe.ScalarQuantizationConfig(
                    type=qe.ScalarType.Int8, quantile=LAYOUT.quantile, memory=qe.Memory.Cached
                ),
            )
        sparse = None
        if text:  # see Layout.text: Qdrant counts document frequencies; the sparse index is in memory
            sparse = {
                LAYOUT.text: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=qe.Memory.Cached)
            }
        config = qe.EdgeConfig(
            vectors=vectors,
            sparse_vectors=sparse,
            # No HNSW graph (m=0): the index is the int8 copy, scanned whole and rescored (see _core.py).
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
        with self._lock, self._translate(name, "creating the collection"):
            if shard_dir.is_dir() and any(shard_dir.iterdir()):
                # A shard without docvec.json: a creation that crashed before its last step. Loading with
                # the config makes qdrant-edge check the dim against the existing segments.
                log.warning("collection %r: finishing an interrupted creation in %s", name, shard_dir)
                shard = qe.EdgeShard.load(str(shard_dir), config)
            else:
                shard_dir.parent.mkdir(parents=True, exist_ok=True)
                shard = qe.EdgeShard.create(str(shard_dir), config)
            try:
                for field in LAYOUT.indexed_fields:
                    shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
                self._write_out(name, shard)
                # The record is written last: its presence means the collection is complete.
                meta: dict[str, Any] = {
                    "format": _META_FORMAT,
                    "vector": LAYOUT.vector,
                    "dim": dim,
                    "distance": LAYOUT.distance,
                    "datatype": LAYOUT.datatype,
                }
                if tokens is not None:
                    meta["tokens"] = tokens
                if text:
                    meta["text"] = True
                try:
                    write_json_atomic(self.path / name / _META_FILE, meta, durable=True)
                except OSError as exc:
                    raise StoreError(f"collection {name!r}: cannot write its record: {exc}") from exc
            except DiskFullError:
                _never_release(shard)  # closing flushes: on a full disk, that can kill the process
                raise
            except BaseException:
                with contextlib.suppress(Exception):
                    shard.close()
                raise
            self._shards[name] = shard
            self._formats[name] = _META_FORMAT
            self._dims[name] = dim
            self._reload(name)
        log.info("created collection %r (%d-d, cosine) in %s", name, dim, self.path)

    def token_dim(self, name: str) -> int | None:
        meta = self._read_meta(name)
        if meta is None:
            raise CollectionNotFoundError(f"collection {name!r} does not exist at {self.where}")
        return int(meta["tokens"]) if meta.get("tokens") else None

    def has_text(self, name: str) -> bool:
        meta = self._read_meta(name)
        if meta is None:
            raise CollectionNotFoundError(f"collection {name!r} does not exist at {self.where}")
        return bool(meta.get("text"))

    def collections(self) -> list[str]:
        """Names of the collections with a record in this folder (none when there is no folder)."""
        return [p.parent.name for p in self.path.glob(f"*/{_META_FILE}")] if self.path.is_dir() else []

    def drop_collection(self, name: str) -> None:
        """Close the shard, remove its record (from then on the collection does not exist, even if a crash
        stops what follows), then its files."""
        with self._lock:
            shard = self._shards.pop(name, None)
            if shard is not None:
                with self._translate(name, "closing the shard"):
                    shard.close()
            self._formats.pop(name, None)
            self._dims.pop(name, None)
            folder = self.path / name
            try:
                (folder / _META_FILE).unlink(missing_ok=True)
                fsync_dir(folder)
                shutil.rmtree(folder, ignore_errors=True)
            except OSError as exc:
                raise StoreError(f"collection {name!r}: cannot remove {folder}: {exc}") from exc
        log.info("dropped collection %r from %s", name, self.path)

    # -- aliases and records -----------------------------------------------------------------------

    def aliases(self) -> dict[str, str]:
        with self._lock:
            if self._aliases is None:
                self._aliases = self._read_aliases()
            return dict(self._aliases)

    def _read_aliases(self) -> dict[str, str]:
        path = self.path / _ALIASES_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read the collection pointers {path}: {exc}") from exc
        aliases = data.get("aliases") if isinstance(data, dict) else None
        if not isinstance(aliases, dict):
            raise StoreError(f"{path} is not a valid file of collection pointers")
        return {str(k): str(v) for k, v in aliases.items()}

    def set_alias(self, alias: str, collection: str) -> None:
        """Rewrite the pointer file (a new file renamed over the old one, synced): a crash leaves the old
        pointers or the new ones."""
        self._own()
        self._check_space(_SMALL_WRITE, f"switching collection {alias!r}")
        with self._lock:
            aliases = self.aliases() | {alias: collection}
            try:
                write_json_atomic(self.path / _ALIASES_FILE, {"aliases": aliases}, durable=True)
            except OSError as exc:
                raise StoreError(f"cannot write {self.path / _ALIASES_FILE}: {exc}") from exc
            self._aliases = aliases
        log.debug("collection %r now reads %r in %s", alias, collection, self.path)

    def read_record(self, name: str) -> dict[str, Any] | None:
        meta = self._read_meta(name)
        record = meta.get("record") if meta is not None else None
        return record if isinstance(record, dict) else None

    def write_record(self, name: str, record: dict[str, Any]) -> None:
        self._check_space(_SMALL_WRITE, f"recording collection {name!r}")
        with self._lock:
            meta = self._read_meta(name)
            if meta is None:
                raise CollectionNotFoundError(f"collection {name!r} does not exist at {self.where}")
            try:
                write_json_atomic(self.path / name / _META_FILE, meta | {"record": record}, durable=True)
            except OSError as exc:
                raise StoreError(f"collection {name!r}: cannot write its record: {exc}") from exc

    # -- writes ------------------------------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[Point]) -> None:
        # each point lands in the write-ahead log and in the segment: vector (float32 until quantized) and
        # payload, twice over
        needed = _CHUNK_ROOM + sum(
            2 * (4 * p.vector.size + len(json.dumps(p.payload, default=str)))
            + (4 * p.tokens.size if p.tokens is not None else 0)
            + (16 * len(p.terms.indices) if p.terms is not None else 0)
            for p in points
        )
        self._check_space(needed, f"writing {len(points)} pages to collection {name!r}")
        shard = self._shard(name)
        self._wrote = True
        # Building the points is inside the translation too: a payload that is not JSON fails there.
        with self._translate(name, "upsert"):
            ops = [qe.Point(p.id, _vectors(p), p.payload) for p in points]
            shard.update(qe.UpdateOperation.upsert_points(ops))

    def delete(self, name: str, ids: Sequence[str]) -> None:
        self._check_space(_SMALL_WRITE, f"deleting from collection {name!r}")
        shard = self._shard(name)
        self._wrote = True
        with self._translate(name, "delete"):
            shard.update(qe.UpdateOperation.delete_points(list(ids)))

    def delete_where(self, name: str, flt: Filter) -> None:
        self._check_space(_SMALL_WRITE, f"deleting from collection {name!r}")
        shard = self._shard(name)
        self._wrote = True
        with self._translate(name, "delete_where"):
            shard.update(qe.UpdateOperation.delete_points_by_filter(_required_filter(name, flt)))

    def set_payload(self, name: str, flt: Filter, payload: dict[str, Any]) -> None:
        self._check_space(_SMALL_WRITE, f"updating pages of collection {name!r}")
        shard = self._shard(name)
        self._wrote = True
        with self._translate(name, "set_payload"):
            shard.update(qe.UpdateOperation.set_payload_by_filter(_required_filter(name, flt), payload))

    # -- reads -------------------------------------------------------------------------------------

    def scroll(self, name: str, page: Scroll, offset: Any) -> tuple[list[Record], Any]:
        request = qe.ScrollRequest(
            offset=offset,
            limit=page.limit,
            filter=_to_edge_filter(page.flt),
            with_payload=qe.PayloadSelector.Exclude(list(page.without)) if page.without else True,
            with_vector=list(page.vectors) if page.vectors else False,
        )
        shard = self._shard(name)
        with self._translate(name, "scroll"):
            records, next_offset = shard.scroll(request)
        out = [
            Record(str(r.id), dict(r.payload or {}), r.vector if isinstance(r.vector, dict) else None)
            for r in records
        ]
        return out, next_offset

    def count(self, name: str, flt: Filter | None) -> int:
        shard = self._shard(name)
        with self._translate(name, "count"):
            return int(shard.count(qe.CountRequest(exact=True, filter=_to_edge_filter(flt))))

    def facet(self, name: str, field: str, limit: int) -> dict[str, int]:
        shard = self._shard(name)
        with self._translate(name, "facet"):
            found = shard.facet(qe.FacetRequest(field, limit=limit, exact=True))
        # a value whose points were all deleted stays in the index with a count of 0 until a vacuum
        return {str(h.value): int(h.count) for h in found.hits if h.count > 0}

    def search(self, name: str, visual: Visual, k: int, flt: Filter | None) -> list[ScoredPoint]:
        qfilter = _to_edge_filter(flt)
        query, first, params = self._visual(visual, qfilter)
        request = qe.QueryRequest(
            limit=k, query=query, prefetches=first, filter=qfilter, with_payload=True, params=params
        )
        return self._query(name, request)

    def search_text(
        self, name: str, terms: SparseVector, k: int, flt: Filter | None, fusion: Fusion | None
    ) -> list[ScoredPoint]:
        qfilter = _to_edge_filter(flt)
        keyword = qe.Query.Nearest(qe.SparseVector(terms.indices, terms.values), using=LAYOUT.text)
        if fusion is None:
            request = qe.QueryRequest(limit=k, query=keyword, filter=qfilter, with_payload=True)
            return self._query(name, request)
        query, first, params = self._visual(fusion.visual, qfilter)
        stages = [
            qe.Prefetch(fusion.depth, query, prefetches=first, filter=qfilter, params=params),
            qe.Prefetch(fusion.depth, keyword, filter=qfilter),
        ]
        request = qe.QueryRequest(
            limit=k,
            prefetches=stages,
            # Fusion.Rrf is what the engine takes (the stubs name only its outer class)
            query=qe.Fusion.Rrf(k=LAYOUT.rrf_k, weights=[1.0, fusion.weight]),  # type: ignore[arg-type]
            filter=qfilter,
            with_payload=True,
        )
        return self._query(name, request)

    def _visual(
        self, visual: Visual, qfilter: qe.Filter | None
    ) -> tuple[qe.Query, list[qe.Prefetch] | None, qe.SearchParams]:
        """A visual query as the engine takes it, for a search or a fused search's visual stage alike: the
        query, the prefetch it reranks (MaxSim over a dense vector's best points) and its parameters."""
        if visual.tokens is None:
            assert visual.vector is not None
            return qe.Query.Nearest(visual.vector.tolist(), using=LAYOUT.vector), None, self._search_params
        maxsim = qe.Query.Nearest(visual.tokens.tolist(), using=LAYOUT.tokens)
        if visual.vector is None or visual.prefetch is None:
            return maxsim, None, self._scan_tokens
        dense = qe.Query.Nearest(visual.vector.tolist(), using=LAYOUT.vector)
        first = qe.Prefetch(visual.prefetch, dense, filter=qfilter, params=self._search_params)
        return maxsim, [first], self._rerank_tokens

    def _query(self, name: str, request: qe.QueryRequest) -> list[ScoredPoint]:
        shard = self._shard(name)
        with self._translate(name, "search"):
            found = shard.query(request)
        return [ScoredPoint(str(p.id), float(p.score), dict(p.payload or {})) for p in found]

    # -- maintenance -------------------------------------------------------------------------------

    def optimize(self, name: str) -> bool:
        """Quantize the newly written segment once it is large enough, merge small segments and drop
        deleted points; blocks until done (0.6 s for 10k 2048-d points on 2 cores, nothing when there is
        nothing to do). The ingest pipeline runs it at the end of every run.

        A collection made by an earlier docvec (float32, its optimizer builds an HNSW graph: minutes at 50k
        points) is left as it is: it searches exactly without it."""
        shard = self._shard(name)
        if self._formats[name] < 2:
            log.info("collection %r predates docvec's quantized layout: not optimizing it", name)
            return False
        with self._translate(name, "optimize"):
            info = shard.info()
        # at worst a segment as large as they grow is rewritten: float16 vectors, their int8 copy, payloads
        rewritten = min(int(info.points_count) * (3 * self._dims[name] + 1024), 2 * _MAX_SEGMENT_KB * 1024)
        needed = _OPEN_ROOM + rewritten  # and the new segment maps its files
        self._check_space(needed, f"optimizing collection {name!r}")
        self._wrote = True
        with self._translate(name, "optimize"):
            changed = bool(shard.optimize())
        if changed:  # it made a new segment
            self._reload(name)
        else:
            self._write_out(name, shard)
        return changed

    def _reload(self, name: str) -> None:
        """Write the collection's shard out, close it and load it again: the files a load maps are then
        allocated now, by this writer, not by the first reader of a full disk. A new segment's files are
        mostly holes until a load reads them, and a file system that allocates holes as a mapping reads
        them (tmpfs) takes their room then (docs/operations.md, "A full disk"); elsewhere this costs a
        load."""
        with self._lock:
            shard = self._shards[name]
            self._write_out(name, shard)
            with self._translate(name, "closing the shard"):
                shard.close()
            del self._shards[name]
            try:
                self._shards[name] = self._load(name)
            except DiskFullError as exc:  # loaded on first use instead (see _shard), room permitting
                log.info("%s", exc)

    def _write_out(self, name: str, shard: qe.EdgeShard) -> None:
        """Flush one shard, refused before it starts (:class:`~docvec.DiskFullError`) without the room a
        flush takes: one that runs out of room part-way fails, and the next flush of that shard, its
        destructor's included, can then die of SIGBUS on the same full disk. Not held to the reserve: it
        makes writes already taken durable."""
        self._check_space(_FLUSH_ROOM, f"writing out collection {name!r}", reserve=0)
        with self._translate(name, "writing out"):
            shard.flush()

    def flush(self) -> None:
        """Write every open collection's pending changes out to its segments (a disk too full for it:
        :class:`~docvec.DiskFullError`, the changes kept in the write-ahead log)."""
        with self._lock:
            for name, shard in self._shards.items():
                self._write_out(name, shard)

    def close(self) -> None:
        """Flush and close every open collection, then release the folder.

        A collection that cannot be written out (a full disk) is left as it is, and never released in
        this process: what it holds stays in its write-ahead log, which the next open replays, and
        releasing it would flush it once more, which on a full disk can kill the process with SIGBUS.
        The error is raised when this process changed the collection; a reader's close only logs it.
        """
        with self._lock:
            first_error: StoreError | None = None
            for name, shard in self._shards.items():
                try:
                    self._write_out(name, shard)
                    with self._translate(name, "close"):
                        shard.close()
                except StoreError as exc:
                    _never_release(shard)
                    if self._wrote:
                        log.error("%s", exc)
                        first_error = first_error or exc
                    else:
                        log.info("%s (nothing this process wrote is in it)", exc)
            self._shards.clear()
            # Shards are closed (their WAL locks released) before the folder lock is let go.
            self._owner.release()
            log.info("closed embedded store %s", self.path)
            if first_error is not None:
                raise first_error


def _loads_in_a_child(shard_dir: Path) -> bool:
    """Whether the shard in ``shard_dir`` loads, tried in a child process (see EdgeBackend._load): false
    when the child ran out of room (killed by a signal, or qdrant-edge's ENOSPC) or could not be started;
    true when it loaded, or failed for another reason, which this process's own load then reports."""
    try:
        child = subprocess.run(
            [sys.executable, "-c", _TRIAL_LOAD, str(shard_dir)], capture_output=True, text=True, check=False
        )
    except OSError:
        return False  # no interpreter to try it in (an embedded Python): the bound decides
    if child.returncode < 0:
        log.info("a trial load of %s ended by signal %d: too little room", shard_dir, -child.returncode)
        return False
    return child.returncode == 0 or not any(words in child.stderr for words in _NO_ROOM)


def _never_release(shard: qe.EdgeShard) -> None:
    """Keep ``shard`` alive until the process ends, its destructor never run (see EdgeBackend.close): one
    reference more that nothing gives back."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(shard))


def _vectors(p: Point) -> dict[str, Any]:
    vectors: dict[str, Any] = {LAYOUT.vector: p.vector.tolist()}
    if p.tokens is not None:
        vectors[LAYOUT.tokens] = p.tokens.tolist()
    if p.terms is not None and p.terms.indices:
        vectors[LAYOUT.text] = qe.SparseVector(p.terms.indices, p.terms.values)
    return vectors


def _required_filter(name: str, flt: Filter) -> qe.Filter:
    qfilter = _to_edge_filter(flt)
    if qfilter is None or flt.is_empty:  # the core refuses this first: never touch every point by accident
        raise StoreError(f"collection {name!r}: this operation needs a filter with a condition")
    return qfilter


def _to_edge_filter(flt: Filter | None) -> qe.Filter | None:
    """docvec's Filter as a qdrant-edge Filter (``None`` when it has no condition).

    MatchAny, not MatchValue, even for one value: it is the same index lookup, and MatchValue has the
    boolean pitfall (it never matches stored booleans); all docvec's filter fields are keywords.
    """
    if flt is None or not (flt.conditions() or flt.exclusions()):
        return None
    return qe.Filter(
        must=[qe.FieldCondition(key, match=qe.MatchAny(list(values))) for key, values in flt.conditions()]
        or None,
        must_not=[qe.FieldCondition(key, match=qe.MatchAny(list(values))) for key, values in flt.exclusions()]
        or None,
    )


if TYPE_CHECKING:

    def _conforms(backend: EdgeBackend) -> Backend:
        # mypy proves here that EdgeBackend implements the whole protocol.
        return backend
