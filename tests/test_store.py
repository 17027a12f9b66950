"""The store contract, run against both backends: the embedded qdrant-edge store (EdgeBackend) and
qdrant-client (RemoteBackend) in its local mode, which runs the same client code as against a server.
Then what only one backend has: the embedded store's process lock and crash safety, the remote store's
retries and error translation. Last, the store's text on both backends: a sparse vector of the page's terms
in the same point, Qdrant's IDF, keyword search and its fusion with each visual query."""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import docvec._store as store_pkg
from docvec import (
    CollectionNotFoundError,
    ConflictError,
    DocvecError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
)
from docvec._store import (
    LAYOUT,
    Dense,
    EdgeBackend,
    Filter,
    Fused,
    Hybrid,
    Keywords,
    MaxSim,
    Point,
    RemoteBackend,
    ScoredPoint,
    Store,
    open_store,
    point_id,
)
from docvec._text._terms import Analyzer, SparseVector, TermWeights, document_vector, query_vector

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ["edge", "remote"]
# New collections store vectors as float16 (docvec._store.LAYOUT): a vector comes back as its unit vector
# rounded to 11 significant bits, so each component within 2**-12 of it, and a cosine score within
# 2**-11. qdrant-client's local mode ignores the datatype and keeps float32, which is inside both bounds.
STORED_ATOL = 2**-12
SCORE_ATOL = 2**-11

Opener = Callable[..., Store]


def _remote(url: str | None = None, **options: Any) -> Store:
    """A store on the server backend: a URL, ``":memory:"``, or local mode at ``path=``."""
    return Store(RemoteBackend(url, **options))


def _open(backend: str, where: Path, *, persistent: bool = False) -> Store:
    if backend == "edge":
        return Store(EdgeBackend(where / "edge"))
    # qdrant-client's path= mode writes to disk after every point: keep it for the tests that reopen.
    return Store(RemoteBackend(path=where / "qlocal") if persistent else RemoteBackend(":memory:"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def opener(backend: str, tmp_path: Path) -> Iterator[Opener]:
    """Opens a store of the backend under test, always at the same place; closes what it opened."""
    opened: list[Store] = []

    def open_(*, persistent: bool = False) -> Store:
        s = _open(backend, tmp_path, persistent=persistent)
        opened.append(s)
        return s

    yield open_
    for s in opened:
        s.close()


@pytest.fixture
def store(opener: Opener) -> Store:
    return opener()


def _unit(v: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    unit: npt.NDArray[np.float32] = v / np.linalg.norm(v, axis=-1, keepdims=True)
    return unit


def _corpus(n: int, dim: int, seed: int = 0) -> tuple[list[Point], np.ndarray]:
    """n random points; doc_id d0..d4, source s0/s1, tags from lang=en|de and kind=a|b|c."""
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    points = [
        Point(
            point_id("doc", i),
            vecs[i],
            {
                "doc_id": f"d{i % 5}",
                "source": f"s{i % 2}",
                "tags": [f"lang={'en' if i % 3 else 'de'}", f"kind={'abc'[i % 3 if i % 7 else 0]}"],
                "page": i,
            },
        )
        for i in range(n)
    ]
    return points, vecs


def _as_scored(store: Store, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """A unit query as the store scores it: where vectors are stored as float16 (the embedded store),
    Qdrant rounds the query to float16 as well."""
    return query.astype(np.float16).astype(np.float32) if isinstance(store.backend, EdgeBackend) else query


def _matches(payload: dict[str, Any], flt: Filter) -> bool:
    return (
        (not flt.doc_ids or payload["doc_id"] in flt.doc_ids)
        and (not flt.sources or payload["source"] in flt.sources)
        and (not flt.tags or any(t in flt.tags for t in payload["tags"]))
    )


FILTERS = [
    Filter(doc_ids=("d1",)),
    Filter(doc_ids=("d1", "d3")),
    Filter(sources=("s0",)),
    Filter(tags=("lang=de",)),
    Filter(tags=("kind=b", "kind=c")),
    Filter(doc_ids=("d2", "d4"), sources=("s1",)),
    Filter(doc_ids=("d0", "d1", "d2"), sources=("s0",), tags=("lang=en",)),
    Filter(doc_ids=("nope",)),
]


# -- the contract -------------------------------------------------------------------------------------


def test_create_collections_and_dims(store: Store) -> None:
    assert store.collections() == []
    store.ensure_collection("pages", 8)
    store.ensure_collection("pages", 8)  # idempotent
    store.ensure_collection("other-1", 4)
    assert store.collections() == ["other-1", "pages"]
    assert store.count("pages") == 0
    with pytest.raises(StoreError, match=r"8-d.*not 16-d"):
        store.ensure_collection("pages", 16)
    with pytest.raises(StoreError, match="invalid collection name"):
        store.ensure_collection("../escape", 8)
    with pytest.raises(StoreError, match="dim"):
        store.ensure_collection("zero", 0)
    with pytest.raises(CollectionNotFoundError, match="missing"):
        store.count("missing")
    with pytest.raises(CollectionNotFoundError):
        store.search("missing", Dense(np.ones(8)), 3)
    with pytest.raises(CollectionNotFoundError):
        store.scroll("missing")  # fails at the call, not at the first next()


def test_wrong_dim_on_reopen(opener: Opener) -> None:
    s = opener(persistent=True)
    s.ensure_collection("pages", 8)
    s.close()
    s = opener(persistent=True)
    with pytest.raises(StoreError, match=r"exists .*8-d vectors, not 16-d"):
        s.ensure_collection("pages", 16)
    s.ensure_collection("pages", 8)


def test_upsert_overwrites_same_id(store: Store) -> None:
    store.ensure_collection("c", 4)
    pid = point_id("doc-a", 1)
    store.upsert("c", [Point(pid, np.array([1, 0, 0, 0], np.float32), {"doc_id": "a", "v": 1})])
    store.upsert("c", [Point(pid, np.array([0, 3, 0, 4], np.float32), {"doc_id": "a", "v": 2})])
    assert store.count("c") == 1
    assert list(store.scroll("c")) == [(pid, {"doc_id": "a", "v": 2})]
    [p] = list(store.scroll("c", with_vectors=True))
    assert p.id == pid and p.payload["v"] == 2
    # cosine collections keep vectors unit-length
    np.testing.assert_allclose(p.vector, [0, 0.6, 0, 0.8], atol=STORED_ATOL)


def test_ids_are_canonical_uuids(store: Store) -> None:
    store.ensure_collection("c", 2)
    upper = str(uuid.uuid4()).upper()
    store.upsert("c", [Point(upper, np.ones(2, np.float32), {})])
    assert [i for i, _ in store.scroll("c")] == [upper.lower()]
    with pytest.raises(StoreError, match="not a UUID"):
        Point("page-1", np.ones(2, np.float32), {})
    assert point_id("doc", 3) == point_id("doc", 3) != point_id("doc", 4)
    assert point_id("a", "bc") != point_id("ab", "c")


def test_bad_points_write_nothing(store: Store) -> None:
    store.ensure_collection("c", 4)
    good = Point(point_id(1), np.ones(4, np.float32), {})
    bad = Point(point_id(2), np.ones(5, np.float32), {})
    with pytest.raises(StoreError, match=r"'c'.*5-d vector"):
        store.upsert("c", [good, bad])
    assert store.count("c") == 0
    with pytest.raises(StoreError, match="NaN"):
        Point(point_id(3), np.array([1, np.nan, 0, 0]), {})
    with pytest.raises(StoreError, match="1-D"):
        Point(point_id(3), np.ones((2, 2), np.float32), {})
    with pytest.raises(StoreError, match="shape"):
        store.search("c", Dense(np.ones(3)), 1)
    with pytest.raises(StoreError, match="k must be"):
        store.search("c", Dense(np.ones(4)), 0)


def test_scroll_and_count_with_filters(store: Store) -> None:
    points, _ = _corpus(60, 8)
    store.ensure_collection("c", 8)
    store.upsert("c", points)
    by_id = {p.id: p.payload for p in points}
    assert store.count("c") == 60
    # batch 7: several pages, the last one partial
    assert dict(store.scroll("c", batch=7)) == by_id
    assert store.count("c", Filter()) == 60
    for flt in FILTERS:
        expected = {i for i, payload in by_id.items() if _matches(payload, flt)}
        got = [i for i, _ in store.scroll("c", flt, batch=7)]
        assert len(got) == len(set(got)), "scroll yielded a point twice"
        assert set(got) == expected, flt
        assert store.count("c", flt) == len(expected), flt
    some = Filter(doc_ids=("d2",))
    vec_points = list(store.scroll("c", some, with_vectors=True, batch=5))
    originals = {p.id: p for p in points}
    assert len(vec_points) == 12
    for p in vec_points:
        assert p.payload == originals[p.id].payload
        np.testing.assert_allclose(p.vector, _unit(originals[p.id].vector), atol=STORED_ATOL)


def test_facet_counts_each_indexed_value(store: Store) -> None:
    points, _ = _corpus(60, 8)
    store.ensure_collection("c", 8)
    assert store.facet("c", "doc_id") == {}
    store.upsert("c", points)
    store.delete("c", [points[0].id])
    store.delete_where("c", Filter(doc_ids=("d1",)))  # a value with no point left is not listed
    left = [p for p in points[1:] if p.payload["doc_id"] != "d1"]
    assert "d1" not in store.facet("c", "doc_id")
    for field in ("doc_id", "source"):
        expected: dict[str, int] = {}
        for p in left:
            expected[p.payload[field]] = expected.get(p.payload[field], 0) + 1
        assert store.facet("c", field) == expected
    tags: dict[str, int] = {}
    for p in left:
        for t in p.payload["tags"]:
            tags[t] = tags.get(t, 0) + 1
    assert store.facet("c", "tags") == tags  # a list field counts each of its values
    with pytest.raises(StoreError, match="only of doc_id, source, tags"):
        store.facet("c", "page")
    with pytest.raises(CollectionNotFoundError):
        store.facet("nope", "doc_id")


def test_delete_and_delete_where(store: Store) -> None:
    points, _ = _corpus(50, 8)
    store.ensure_collection("c", 8)
    store.upsert("c", points)
    store.delete("c", [points[0].id, points[1].id, point_id("never-stored")])
    assert store.count("c") == 48
    assert points[0].id not in dict(store.scroll("c"))
    store.delete_where("c", Filter(doc_ids=("d2",), sources=("s0",)))
    left = [p for p in points[2:] if not (p.payload["doc_id"] == "d2" and p.payload["source"] == "s0")]
    assert {i for i, _ in store.scroll("c")} == {p.id for p in left}
    store.delete_where("c", Filter(tags=("lang=de",)))
    assert store.count("c") == sum(1 for p in left if "lang=de" not in p.payload["tags"])
    with pytest.raises(StoreError, match="at least one condition"):
        store.delete_where("c", Filter())
    with pytest.raises(StoreError, match="not one string"):
        store.delete("c", points[5].id)


def test_search_matches_brute_force(store: Store) -> None:
    points, vecs = _corpus(500, 128, seed=1)
    store.ensure_collection("c", 128)
    store.upsert("c", points)
    ids = np.array([p.id for p in points])
    # The search is exact over the vectors as stored (float16 in the embedded store): brute force over
    # those gives the same ranking, and the scores are those of the original vectors to within rounding.
    stored = {p.id: p.vector for p in store.scroll("c", with_vectors=True)}
    unit = np.stack([stored[i] for i in ids])
    original = _unit(vecs)
    half = np.array_equal(unit, unit.astype(np.float16).astype(np.float32))
    assert half == (isinstance(store.backend, EdgeBackend))
    queries = np.random.default_rng(2).standard_normal((8, 128)).astype(np.float32)
    for q in queries:
        scores = unit @ _as_scored(store, _unit(q))
        order = np.argsort(-scores)[:10]
        hits = store.search("c", Dense(q), 10)
        assert all(isinstance(h, ScoredPoint) for h in hits)
        assert [h.id for h in hits] == list(ids[order])
        np.testing.assert_allclose([h.score for h in hits], scores[order], atol=1e-5)
        np.testing.assert_allclose([h.score for h in hits], (original @ _unit(q))[order], atol=SCORE_ATOL)
        assert hits[0].payload == points[order[0]].payload

        flt = Filter(sources=("s1",), tags=("kind=a", "kind=b"))
        mask = np.array([_matches(p.payload, flt) for p in points])
        masked = np.where(mask, scores, -np.inf)
        order = np.argsort(-masked)[:10]
        hits = store.search("c", Dense(q), 10, flt)
        assert [h.id for h in hits] == list(ids[order])
        np.testing.assert_allclose([h.score for h in hits], scores[order], atol=1e-5)
        assert all(_matches(h.payload, flt) for h in hits)
    # k above the number of matching points returns them all
    assert len(store.search("c", Dense(queries[0]), 50, Filter(doc_ids=("d1",), sources=("s1",)))) == 50
    assert len(store.search("c", Dense(queries[0]), 500, Filter(doc_ids=("d1",)))) == 100


def test_search_after_optimize_is_rescored_and_filtered(store: Store) -> None:
    # 1200 x 1024-d is 2.4 MB of float16: over the threshold at which optimize() quantizes a segment
    points, _ = _corpus(1200, 1024, seed=7)
    store.ensure_collection("c", 1024)
    store.upsert("c", points)
    changed = store.optimize("c")
    assert changed == isinstance(store.backend, EdgeBackend)  # a server (or local mode) has nothing to do
    if isinstance(store.backend, EdgeBackend):
        assert store.optimize("c") is False  # and once done, nothing is left to do
        shard = store.backend._shard(store.live("c"))  # type: ignore[attr-defined]
        assert shard.info().indexed_vectors_count == 1200  # searches now scan the int8 copy
    stored = {p.id: p.vector for p in store.scroll("c", with_vectors=True)}
    ids = np.array([p.id for p in points])
    unit = np.stack([stored[i] for i in ids])
    queries = _unit(np.random.default_rng(8).standard_normal((10, 1024)).astype(np.float32))
    found = 0
    for q in queries:
        scores = dict(zip(ids, unit @ _as_scored(store, q), strict=True))
        hits = store.search("c", Dense(q), 10)
        # rescored: every score is the exact score of the stored vector, and the order follows it
        np.testing.assert_allclose([h.score for h in hits], [scores[h.id] for h in hits], atol=1e-5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        found += len({h.id for h in hits} & set(sorted(scores, key=scores.__getitem__)[-10:]))
        flt = Filter(doc_ids=("d3",), tags=("lang=de",))
        filtered = store.search("c", Dense(q), 5, flt)
        assert filtered and all(_matches(h.payload, flt) for h in filtered)
    # the int8 scan can miss a near tie in the top 10; rescoring twice as many keeps that rare
    assert found / (10 * len(queries)) >= 0.95
    # writes after optimize(): a deleted point is gone, an overwritten one is found by its new vector
    q = queries[0]
    top = store.search("c", Dense(q), 1)[0]
    store.delete("c", [top.id])
    assert top.id not in {h.id for h in store.search("c", Dense(q), 10)}
    moved = points[5]
    store.upsert("c", [Point(moved.id, q * 3, moved.payload)])
    hit = store.search("c", Dense(q), 1)[0]
    assert hit.id == moved.id and hit.score == pytest.approx(1.0, abs=SCORE_ATOL)
    assert store.count("c") == 1199


def test_persistence_across_reopen(opener: Opener) -> None:
    points, vecs = _corpus(30, 16, seed=3)
    with opener(persistent=True) as s:
        s.ensure_collection("c", 16)
        s.upsert("c", points)
        s.delete("c", [points[0].id])
        before = s.search("c", Dense(vecs[5]), 5)
    s = opener(persistent=True)
    assert s.collections() == ["c"]
    assert s.count("c") == 29
    after = s.search("c", Dense(vecs[5]), 5)
    assert [h.id for h in after] == [h.id for h in before]
    assert [h.payload for h in after] == [h.payload for h in before]
    np.testing.assert_allclose([h.score for h in after], [h.score for h in before], atol=1e-6)
    assert before[0].id == points[5].id
    s.ensure_collection("c", 16)


def test_batched_upsert_of_1000_points(store: Store) -> None:
    points, _ = _corpus(1000, 32, seed=4)
    store.ensure_collection("c", 32)
    store.upsert("c", points)
    store.flush()
    assert store.count("c") == 1000
    assert {i for i, _ in store.scroll("c", batch=300)} == {p.id for p in points}
    store.upsert("c", points[:300])  # idempotent
    assert store.count("c") == 1000


def test_closed_store_refuses_work(opener: Opener) -> None:
    s = opener()
    s.ensure_collection("c", 2)
    s.close()
    s.close()  # twice is fine
    with pytest.raises(StoreError, match="closed"):
        s.count("c")


def test_filter_normalises_its_fields() -> None:
    f = Filter(doc_ids="a", tags=["x=1", "y=2"])  # type: ignore[arg-type]
    assert f.doc_ids == ("a",) and f.tags == ("x=1", "y=2") and f.sources == ()
    assert hash(f) == hash(Filter(doc_ids=("a",), tags=("x=1", "y=2")))
    assert Filter().is_empty and not f.is_empty
    with pytest.raises(StoreError):
        Filter(doc_ids=(1,))  # type: ignore[arg-type]


# -- open_store, exports, install hints ---------------------------------------------------------------


def test_open_store_picks_the_backend(tmp_path: Path) -> None:
    with open_store(path=tmp_path / "s") as s:
        assert isinstance(s.backend, EdgeBackend)
    with open_store(url=":memory:") as s:
        assert isinstance(s.backend, RemoteBackend)
    with pytest.raises(StoreError, match="no store configured"):
        open_store()


def test_public_names() -> None:
    assert len(set(store_pkg.__all__)) == len(store_pkg.__all__)
    for name in store_pkg.__all__:
        assert getattr(store_pkg, name) is not None
    assert issubclass(StoreError, DocvecError)
    for cls in (StoreBusyError, StoreUnavailableError, CollectionNotFoundError):
        assert issubclass(cls, StoreError)


def test_missing_backend_package_gives_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # as on a machine without the packages: importing them fails, and the backend modules load afresh
    for package, module in (
        ("qdrant_edge", "docvec._store._edge"),
        ("qdrant_client", "docvec._store._remote"),
    ):
        monkeypatch.setitem(sys.modules, package, None)
        monkeypatch.delitem(sys.modules, module)
    with pytest.raises(
        StoreError, match=r"the embedded store needs the qdrant_edge package: pip install qdrant-edge-py"
    ):
        open_store(path=tmp_path)
    with pytest.raises(
        StoreError, match=r"a Qdrant server needs the qdrant_client package: pip install 'docvec\[server\]'"
    ):
        open_store(url="http://localhost:6333")


def _run_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def test_remote_user_never_imports_qdrant_edge() -> None:
    proc = _run_python(
        """
        import json, sys
        from docvec._store import open_store
        s = open_store(url="http://127.0.0.1:9")
        s.close()
        print(json.dumps({m: m in sys.modules for m in ("qdrant_edge", "qdrant_client")}))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"qdrant_edge": False, "qdrant_client": True}


# -- embedded store only ------------------------------------------------------------------------------


def test_edge_second_process_is_told_who_holds_the_store(tmp_path: Path) -> None:
    with open_store(path=tmp_path) as s:
        s.ensure_collection("c", 4)
        proc = _run_python(
            f"""
            import json, sys
            from docvec import StoreBusyError
            from docvec._store import open_store
            try:
                open_store(path={str(tmp_path)!r})
            except StoreBusyError as exc:
                print(json.dumps({{"message": str(exc), "owner": exc.owner,
                                  "qdrant_client": "qdrant_client" in sys.modules}}))
                sys.exit(3)
            """
        )
        assert proc.returncode == 3, proc.stderr
        report = json.loads(proc.stdout.splitlines()[-1])
        message = report["message"]
        assert f"process {os.getpid()} on {socket.gethostname()}" in message
        assert "docvec serve" in message and "DOCVEC_QDRANT_URL" in message
        assert report["owner"]["pid"] == os.getpid()
        assert "pytest" in report["owner"]["cmdline"] or sys.argv[0] in report["owner"]["cmdline"]
        assert report["qdrant_client"] is False  # an embedded user never imports qdrant-client
        # a second handle in this process is refused the same way
        with pytest.raises(StoreBusyError, match="this process"):
            open_store(path=tmp_path)
        assert s.count("c") == 0  # and the first one still works
    # once closed, the folder can be opened again, and the owner record is gone
    assert not (tmp_path / ".owner.json").exists()
    open_store(path=tmp_path).close()


def test_edge_translates_wal_wouldblock(tmp_path: Path) -> None:
    import qdrant_edge

    with open_store(path=tmp_path) as s:
        s.ensure_collection("c", 4)
    # Something outside docvec holds the shard's WAL; docvec's folder lock is free.
    holder = qdrant_edge.EdgeShard.load(str(tmp_path / "c.v1" / "shard"))
    try:
        with open_store(path=tmp_path) as s, pytest.raises(StoreBusyError, match="docvec serve"):
            s.count("c")
    finally:
        holder.close()


def test_edge_unflushed_write_survives_a_crash(tmp_path: Path) -> None:
    pid = point_id("crash", 1)
    proc = _run_python(
        f"""
        import os
        import numpy as np
        from docvec._store import Point, open_store
        s = open_store(path={str(tmp_path)!r})
        s.ensure_collection("c", 4)
        s.upsert("c", [Point({pid!r}, np.array([1, 2, 3, 4], np.float32), {{"doc_id": "crash"}})])
        print("written", flush=True)
        os._exit(0)  # no flush, no close
        """
    )
    assert proc.returncode == 0 and "written" in proc.stdout, proc.stderr
    assert (tmp_path / ".owner.json").exists()  # the dead process's record is left behind...
    with open_store(path=tmp_path) as s:  # ...and does not stop a new owner: the lock died with it
        assert s.count("c") == 1
        assert list(s.scroll("c")) == [(pid, {"doc_id": "crash"})]
        assert s.search("c", Dense(np.array([1, 2, 3, 4])), 1)[0].id == pid
        assert json.loads((tmp_path / ".owner.json").read_text())["pid"] == os.getpid()


def test_edge_reopens_fast(tmp_path: Path) -> None:
    points, vecs = _corpus(3000, 256, seed=5)
    with open_store(path=tmp_path) as s:
        s.ensure_collection("c", 256)
        s.upsert("c", points)
    start = time.perf_counter()
    with open_store(path=tmp_path) as s:
        assert s.count("c") == 3000
        assert s.search("c", Dense(vecs[7]), 1)[0].id == points[7].id
        elapsed = time.perf_counter() - start
    # measured 0.1-0.4 s on 2 cores; the bound leaves room for a loaded machine
    assert elapsed < 3.0


def test_edge_finishes_an_interrupted_creation(tmp_path: Path) -> None:
    points, _ = _corpus(10, 4)
    with open_store(path=tmp_path) as s:
        s.ensure_collection("c", 4)
        s.upsert("c", points)
    # as if the process died before the last steps: the record, then the pointer to the new version
    (tmp_path / "c.v1" / "docvec.json").unlink()
    (tmp_path / "aliases.json").unlink()
    with open_store(path=tmp_path) as s:
        assert s.collections() == []
        with pytest.raises(StoreError, match="vector size"):
            s.ensure_collection("c", 8)  # qdrant-edge checks the dim against the segments
        s.ensure_collection("c", 4)
        assert s.count("c") == 10


def test_edge_collection_layout_is_tuned_for_search(tmp_path: Path) -> None:
    with open_store(path=tmp_path) as s:
        s.ensure_collection("c", 4)
    meta = json.loads((tmp_path / "c.v1" / "docvec.json").read_text())
    assert meta["datatype"] == LAYOUT.datatype == "float16"
    # what qdrant-edge persisted, and so what every later load of the shard runs with
    config = json.loads((tmp_path / "c.v1" / "shard" / "edge_config.json").read_text())
    assert config["vectors"]["page"]["datatype"] == "float16"
    assert config["payload_memory"] == "cached"
    assert config["max_search_threads"] == 1
    assert config["optimizers"]["indexing_threshold"] == 1000
    assert config["optimizers"]["max_segment_size"] == 50_000
    assert config["hnsw_config"]["m"] == 0  # no graph: searches scan the int8 copy
    assert config["vectors"]["page"]["quantization_config"]["scalar"]["type"] == "int8"


def test_edge_optimized_collection_reopens_with_the_same_answers(tmp_path: Path) -> None:
    points, vecs = _corpus(1200, 1024, seed=9)
    with open_store(path=tmp_path) as s:
        s.ensure_collection("c", 1024)
        s.upsert("c", points)
        assert s.optimize("c") is True
        before = [s.search("c", Dense(v), 5) for v in vecs[:5]]
    with open_store(path=tmp_path) as s:
        after = [s.search("c", Dense(v), 5) for v in vecs[:5]]
        assert s.count("c") == 1200
    assert [[h.id for h in r] for r in after] == [[h.id for h in r] for r in before]
    assert [r[0].id for r in after] == [p.id for p in points[:5]]


def test_edge_opens_float32_collections_of_earlier_versions(tmp_path: Path) -> None:
    # A collection as earlier docvec versions made it: float32, payload on disk, no datatype in its record.
    import qdrant_edge as qe

    shard_dir = tmp_path / "old" / "shard"
    shard_dir.parent.mkdir()
    config = qe.EdgeConfig(vectors={"page": qe.EdgeVectorParams(size=8, distance=qe.Distance.Cosine)})
    shard = qe.EdgeShard.create(str(shard_dir), config)
    shard.close()
    meta = {"format": 1, "vector": "page", "dim": 8, "distance": "cosine"}
    (tmp_path / "old" / "docvec.json").write_text(json.dumps(meta))
    points, vecs = _corpus(20, 8, seed=6)
    with open_store(path=tmp_path) as s:
        s.ensure_collection("old", 8)
        s.upsert("old", points)
    with open_store(path=tmp_path) as s:
        assert s.search("old", Dense(vecs[3]), 1)[0].id == points[3].id
        stored = {p.id: p.vector for p in s.scroll("old", with_vectors=True)}
        # its optimizer would build an HNSW graph (minutes for a large collection): left alone
        assert s.optimize("old") is False
    # still float32: nothing rounded its vectors to float16
    np.testing.assert_allclose(stored[points[3].id], _unit(vecs[3]), atol=1e-6)
    assert json.loads((shard_dir / "edge_config.json").read_text())["vectors"]["page"].get("datatype") in (
        None,
        "float32",
    )


def test_edge_foreign_errors_are_store_errors(tmp_path: Path) -> None:
    with open_store(path=tmp_path) as s:
        s.ensure_collection("c", 2)
        with pytest.raises(StoreError, match=r"collection 'c.v1': upsert failed"):
            s.upsert("c", [Point(point_id(1), np.ones(2, np.float32), {"bad": object()})])


# -- remote store only --------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_remote_retries_then_reports_unavailable(caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    start = time.perf_counter()
    with (
        caplog.at_level(logging.WARNING, logger="docvec"),
        _remote(url, retries=4, backoff=0.05, timeout=2) as s,
        pytest.raises(StoreUnavailableError) as info,
    ):
        s.ensure_collection("c", 4)
    assert time.perf_counter() - start < 5
    assert info.value.url == url and info.value.attempts == 4
    assert url in str(info.value) and "4 times" in str(info.value)
    assert sum("retrying" in r.getMessage() for r in caplog.records) == 3


class _Flaky:
    """Stands in for one qdrant_client method: raises the given errors in turn, then answers."""

    def __init__(self, errors: list[Exception], answer: Any = None) -> None:
        self.errors = errors
        self.answer = answer
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.answer


def _http_error(status: int, message: str = "boom") -> Exception:
    import httpx
    from qdrant_client.http.exceptions import UnexpectedResponse

    body = json.dumps({"status": {"error": message}}).encode()
    return UnexpectedResponse(status, "reason", body, httpx.Headers())


def test_remote_error_translation(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx
    from qdrant_client.http.exceptions import ResponseHandlingException

    s = _remote(":memory:", retries=3, backoff=0.001)
    s.ensure_collection("c", 4)
    client = s.backend._client

    # transient errors are retried, and the call then succeeds
    flaky = _Flaky(
        [_http_error(503), ResponseHandlingException(httpx.ConnectError("refused"))], client.count("c")
    )
    monkeypatch.setattr(client, "count", flaky)
    assert s.count("c") == 0 and flaky.calls == 3

    # ...or, when they persist, end as StoreUnavailableError
    flaky = _Flaky([httpx.ReadTimeout("slow")] * 3)
    monkeypatch.setattr(client, "count", flaky)
    with pytest.raises(StoreUnavailableError, match="ReadTimeout"):
        s.count("c")
    assert flaky.calls == 3

    # deterministic errors are not retried, and keep the server's reason
    flaky = _Flaky([_http_error(400, "Wrong input: Vector dimension error")])
    monkeypatch.setattr(client, "upsert", flaky)
    with pytest.raises(StoreError, match=r"collection 'c': upsert failed .*HTTP 400.*dimension") as info:
        s.upsert("c", [Point(point_id(1), np.ones(4, np.float32), {})])
    assert not isinstance(info.value, StoreUnavailableError) and flaky.calls == 1

    flaky = _Flaky([_http_error(404, "Not found: Collection `c` doesn't exist!")])
    monkeypatch.setattr(client, "query_points", flaky)
    with pytest.raises(CollectionNotFoundError):
        s.search("c", Dense(np.ones(4)), 1)

    # anything else a backend raises still arrives as a StoreError, with the original as its cause
    flaky = _Flaky([RuntimeError("surprise")])
    monkeypatch.setattr(client, "scroll", flaky)
    with pytest.raises(StoreError, match="surprise") as info:
        list(s.scroll("c"))
    assert isinstance(info.value.__cause__, RuntimeError)
    s.close()


class _Recorder:
    """Stands in for a server's QdrantClient: records the calls docvec makes, answered by local mode."""

    def __init__(self) -> None:
        from qdrant_client import QdrantClient

        self.client = QdrantClient(":memory:")
        self.calls: dict[str, dict[str, Any]] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def record(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = kwargs
            return method(*args, **kwargs)

        return record


@pytest.mark.filterwarnings("ignore:Local mode performs exact:UserWarning")
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_remote_asks_a_server_for_float16_and_a_rescored_int8_copy() -> None:
    from qdrant_client import models

    s = _remote(f"http://127.0.0.1:{_closed_port()}")  # nothing is sent there: the client is replaced
    recorder = _Recorder()
    s.backend._client = recorder  # type: ignore[assignment]
    s.ensure_collection("c", 4)
    params = recorder.calls["create_collection"]["vectors_config"]["page"]
    assert params.datatype == models.Datatype.FLOAT16 and params.distance == models.Distance.COSINE
    scalar = params.quantization_config.scalar  # the page vector's own: token vectors get none
    assert scalar.type == models.ScalarType.INT8 and scalar.quantile == 0.99 and scalar.always_ram
    s.upsert("c", [Point(point_id(1), np.array([1, 0, 0, 0], np.float32), {"doc_id": "a"})])
    assert [h.payload for h in s.search("c", Dense(np.array([1, 0, 0, 0])), 1)] == [{"doc_id": "a"}]
    quantization = recorder.calls["query_points"]["search_params"].quantization
    assert quantization.rescore is True and quantization.oversampling == 2.0
    assert s.optimize("c") is False  # the server optimizes by itself
    with pytest.raises(CollectionNotFoundError):
        s.optimize("nope")


def test_remote_local_folder_is_single_client(tmp_path: Path) -> None:
    with _remote(path=tmp_path), pytest.raises(StoreBusyError):
        _remote(path=tmp_path)


# -- versions ---------------------------------------------------------------------------------------------


def test_versions_switch_atomically_and_keep_their_records(opener: Opener) -> None:
    s = opener(persistent=True)
    first = s.ensure_collection("docs", 4, {"state": "complete", "n": 1})
    assert first == "docs.v1" and s.live("docs") == first and s.collections() == ["docs"]
    s.upsert("docs", _corpus(5, 4)[0])
    second = s.create_version("docs", 8, {"state": "building"})
    s.upsert(second, _corpus(3, 8)[0])
    # until the switch, the name reads the first version, whose points stay where they are
    assert (second, s.live("docs"), s.count("docs")) == ("docs.v2", first, 5)
    assert s.versions("docs") == [first, second] and s.record(second) == {"state": "building"}
    with pytest.raises(StoreError, match=r"expected \(4,\)"):
        s.search("docs", Dense(np.ones(8, np.float32)), 1)  # the name reaches the live version's 4-d vectors
    s.set_record(second, {"state": "complete"})
    s.switch("docs", second)
    assert s.live("docs") == second and s.count("docs") == 3 and s.count(first) == 5
    assert len(s.search("docs", Dense(np.ones(8, np.float32)), 10)) == 3
    with pytest.raises(ConflictError, match="live"):  # a request the state refuses (409 over the API)
        s.drop(second)
    with pytest.raises(StoreError, match="not a version"):
        s.switch("docs", "other.v1")
    s.drop(first)
    assert s.versions("docs") == [second] and s.record(second) == {"state": "complete"}
    s.close()
    reopened = opener(persistent=True)  # the pointer and the records are durable
    assert reopened.live("docs") == second and reopened.count("docs") == 3
    assert reopened.record("docs") == {"state": "complete"}


def test_a_collection_made_before_versions_is_its_own_first_version(opener: Opener) -> None:
    s = opener()
    s.backend.create_collection("old", 4)  # as earlier docvec made it: named as users search it
    s.upsert("old", _corpus(4, 4)[0])
    assert s.live("old") == "old" and s.versions("old") == ["old"] and s.collections() == ["old"]
    assert s.ensure_collection("old", 4) == "old"  # adopted as it is, nothing copied
    new = s.create_version("old", 4)
    s.upsert(new, _corpus(2, 4, seed=3)[0])
    assert s.count("old") == 4
    s.switch("old", new)
    assert s.live("old") == new and s.count("old") == 2 and s.collections() == ["old"]
    if isinstance(s.backend, EdgeBackend):
        assert s.versions("old") == ["old", new]  # the embedded store keeps it beside the new one
        s.drop("old")
    else:
        # a server cannot give an alias a collection's name: the old collection made way at the switch
        assert s.versions("old") == [new]
    assert s.versions("old") == [new] and s.count("old") == 2


def test_version_names_are_not_collection_names(opener: Opener) -> None:
    s = opener()
    with pytest.raises(StoreError, match="version's name"):
        s.create_version("docs.v3", 4)
    with pytest.raises(CollectionNotFoundError):
        s.drop("docs.v9")


# -- multi-vector collections -------------------------------------------------------------------------------


def _tokens(rng: np.random.Generator, n: int, width: int = 16) -> npt.NDArray[np.float32]:
    return _unit(rng.standard_normal((n, width)).astype(np.float32))


def _maxsim(query: npt.NDArray[np.float32], page: npt.NDArray[np.float32]) -> float:
    return float((query @ page.T).max(axis=1).sum())


def test_multi_vector_collections_store_tokens_and_search_three_ways(opener: Opener) -> None:
    s = opener()
    rng = np.random.default_rng(4)
    dense, _ = _corpus(60, 8, seed=4)
    # pages of different token counts, as real pages have (a few dozen here: the scoring is the same)
    points = [Point(p.id, p.vector, p.payload, _tokens(rng, int(rng.integers(5, 40)))) for p in dense]
    s.ensure_collection("m", 8, tokens=16)
    assert s.token_dim("m") == 16
    s.upsert("m", points)
    stored = {p.id: p for p in s.scroll("m", with_vectors=True)}
    for p in points:  # the tokens come back as written (rounded to float16)
        assert stored[p.id].tokens is not None and stored[p.id].tokens.shape == p.tokens.shape  # type: ignore[union-attr]
        np.testing.assert_allclose(stored[p.id].tokens, p.tokens, atol=STORED_ATOL)  # type: ignore[arg-type]
    query, qvec = _tokens(rng, 7), _unit(rng.standard_normal(8).astype(np.float32))
    exact = {p.id: _maxsim(query, stored[p.id].tokens) for p in points}  # type: ignore[arg-type]
    for flt in [None, *FILTERS]:
        allowed = [p for p in points if flt is None or _matches(p.payload, flt)]
        want = sorted(allowed, key=lambda p: -exact[p.id])[:10]
        multi = s.search("m", MaxSim(query), 10, flt)
        assert [h.id for h in multi] == [p.id for p in want], flt
        np.testing.assert_allclose([h.score for h in multi], [exact[p.id] for p in want], atol=1e-3)
        # a prefetch that covers every page is the exhaustive MaxSim, filters included
        hybrid = s.search("m", Hybrid(qvec, query, len(points)), 10, flt)
        assert [h.id for h in hybrid] == [h.id for h in multi], flt
        # a narrow one reranks only the dense vector's best pages
        narrow = s.search("m", Hybrid(qvec, query, 5), 3, flt)
        dense_best = {h.id for h in s.search("m", Dense(qvec), 5, flt)}
        assert {h.id for h in narrow} <= dense_best and len(narrow) == min(3, len(allowed))
    with pytest.raises(StoreError, match="16-d token vectors"):
        s.upsert("m", [Point(point_id("x"), np.ones(8, np.float32), {})])  # every page has its tokens
    with pytest.raises(StoreError, match="expected 16-d"):
        s.search("m", MaxSim(np.ones((2, 8), np.float32)), 3)
    s.ensure_collection("single", 8)
    with pytest.raises(StoreError, match="single-vector"):
        s.search("single", MaxSim(query), 3)
    with pytest.raises(StoreError, match="single-vector"):
        s.upsert("single", points[:1])
    with pytest.raises(StoreError, match="multi-vector"):
        s.ensure_collection("m", 8)  # a single-vector run cannot take a multi-vector collection


def test_edge_exhaustive_maxsim_scans_the_int8_copy_and_stays_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    dense, _ = _corpus(400, 8, seed=12)
    # 400 pages of 32 128-d tokens: 3.3 MB of float16, past the size at which optimize() quantizes
    points = [Point(p.id, p.vector, p.payload, _tokens(rng, 32, 128)) for p in dense]
    queries = [_tokens(rng, 9, 128) for _ in range(5)]
    with open_store(path=tmp_path) as s:
        s.ensure_collection("m", 8, tokens=128)
        s.upsert("m", points)
        before = [s.search("m", MaxSim(q), 10) for q in queries]  # a float16 scan: nothing quantized yet
        assert s.optimize("m") is True
        stored = {p.id: p.tokens for p in s.scroll("m", with_vectors=True)}
        after = [s.search("m", MaxSim(q), 10) for q in queries]
        hybrid = [s.search("m", Hybrid(points[0].vector, q, len(points)), 10) for q in queries]
    config = json.loads((tmp_path / "m.v1" / "shard" / "edge_config.json").read_text())
    tokens = config["vectors"]["tokens"]
    assert tokens["quantization_config"]["scalar"] == {"type": "int8", "quantile": 0.99, "memory": "cached"}
    assert tokens["memory"] == "cached" and tokens["datatype"] == "float16"
    assert list((tmp_path / "m.v1").rglob("vector_storage-tokens/quantized.data"))  # the copy the scan reads
    for q, b, a, h in zip(queries, before, after, hybrid, strict=True):
        exact = sorted((_maxsim(q, t) for t in stored.values()), reverse=True)[:10]  # type: ignore[arg-type]
        # the pages of the float16 scan, with its scores (rescored with the float16 tokens, not int8's)
        assert [x.id for x in a] == [x.id for x in b] == [x.id for x in h]
        # and those of numpy's exact MaxSim (up to near-ties: Qdrant scores a float16 query)
        np.testing.assert_allclose([_maxsim(q, stored[x.id]) for x in a], exact, rtol=0, atol=5e-4)  # type: ignore[arg-type]
        np.testing.assert_allclose([x.score for x in a], [x.score for x in b], rtol=0, atol=1e-5)
        np.testing.assert_allclose([x.score for x in h], [x.score for x in b], rtol=0, atol=1e-5)


# -- the store's text (both backends) ------------------------------------------------------------------

ANALYZER = Analyzer()
WEIGHTS = TermWeights()
TEXTS = [
    "Invoice INV-2024-0042: total amount due 1,234.56 EUR",
    "Quarterly revenue grew by twelve percent in the north",
    "東京都の人口は約1400万人です",
    "Café au lait and croissants for breakfast",
    "Revenue and costs of the southern region",
]
DIM = 8


def _fill(store: Store, *, tokens: bool = False) -> np.ndarray:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(TEXTS) + 1, DIM)).astype(np.float32)
    store.ensure_collection("c", DIM, tokens=4 if tokens else None, text=True)
    points = [
        Point(
            point_id(i),
            vectors[i],
            {"doc_id": f"d{i}", "tags": ["even" if i % 2 == 0 else "odd"]},
            rng.normal(size=(3, 4)) if tokens else None,
            document_vector(text, ANALYZER, WEIGHTS),
        )
        for i, text in enumerate(TEXTS)
    ]
    # a page without text: no terms, never a keyword hit
    points.append(
        Point(
            point_id(99),
            vectors[-1],
            {"doc_id": "d99", "tags": ["even"]},
            rng.normal(size=(3, 4)) if tokens else None,
        )
    )
    store.upsert("c", points)
    return vectors


def _ids(hits: list[ScoredPoint]) -> list[str]:
    return [h.payload["doc_id"] for h in hits]


def test_keyword_search_scores_bm25_with_the_stores_idf(store: Store) -> None:
    _fill(store)
    assert store.has_text("c")
    hits = store.search("c", Keywords(query_vector("revenue", ANALYZER)), 5)
    assert _ids(hits) == ["d1", "d4"] or _ids(hits) == ["d4", "d1"]
    # the score is the page's term weight times Qdrant's IDF over the pages with text (5 of 6 points)
    n, df = 5, 2
    idf = math.log((n - df + 0.5) / (df + 0.5) + 1)
    page = document_vector(TEXTS[1], ANALYZER, WEIGHTS)
    weight = dict(zip(page.indices, page.values, strict=True))[query_vector("revenue", ANALYZER).indices[0]]
    got = next(h.score for h in hits if h.payload["doc_id"] == "d1")
    assert got == pytest.approx(weight * idf, rel=1e-4)
    assert _ids(store.search("c", Keywords(query_vector("INV-2024-0042", ANALYZER)), 3)) == ["d0"]
    assert _ids(store.search("c", Keywords(query_vector("東京", ANALYZER)), 3)) == ["d2"]
    assert _ids(store.search("c", Keywords(query_vector("cafe", ANALYZER)), 3)) == ["d3"]
    # no term at all (punctuation, stop words only): nothing, rather than every page
    assert store.search("c", Keywords(query_vector("the of ...", ANALYZER)), 3) == []


def test_fusion_joins_the_two_rankings_and_filters_hold(store: Store) -> None:
    vectors = _fill(store)
    near_photo = vectors[-1] + 0.01
    fused = store.search(
        "c", Fused(Dense(near_photo), Keywords(query_vector("revenue", ANALYZER)), depth=10), 6
    )
    ids = _ids(fused)
    # the page the dense vector finds first, and the keyword hits, are all in the fused top 3
    assert ids[0] in ("d99", "d1", "d4") and {"d99", "d1", "d4"} <= set(ids[:3])
    # the keyword ranking weighted 5 to 1: its pages come first
    ahead = store.search(
        "c", Fused(Dense(near_photo), Keywords(query_vector("revenue", ANALYZER)), depth=10, weight=5.0), 6
    )
    assert set(_ids(ahead)[:2]) == {"d1", "d4"}
    # weight 0: the visual ranking alone decides the order
    alone = store.search(
        "c", Fused(Dense(near_photo), Keywords(query_vector("revenue", ANALYZER)), depth=10, weight=0.0), 6
    )
    assert _ids(alone)[0] == "d99"
    odd = Filter(tags=("odd",))
    for terms in (query_vector("revenue", ANALYZER), query_vector("croissants", ANALYZER)):
        assert set(_ids(store.search("c", Keywords(terms), 6, odd))) <= {"d1", "d3"}
        assert set(_ids(store.search("c", Fused(Dense(near_photo), Keywords(terms)), 6, odd))) <= {"d1", "d3"}


def test_multi_vector_and_hybrid_rankings_fuse_with_keywords(store: Store) -> None:
    vectors = _fill(store, tokens=True)
    rng = np.random.default_rng(5)
    tokens = rng.normal(size=(2, 4))
    terms = query_vector("croissants", ANALYZER)
    for visual in (MaxSim(tokens), Hybrid(vectors[0], tokens, 3)):
        hits = store.search("c", Fused(visual, Keywords(terms), depth=10), 3)
        assert "d3" in _ids(hits) and len(hits) == 3


def test_a_collection_without_text_refuses_terms_and_keyword_search(store: Store) -> None:
    store.ensure_collection("plain", DIM)
    assert not store.has_text("plain")
    terms = document_vector("some words", ANALYZER, WEIGHTS)
    with pytest.raises(StoreError, match="keeps no text"):
        store.upsert("plain", [Point(point_id(1), np.ones(DIM), {}, terms=terms)])
    with pytest.raises(StoreError, match="keeps no text"):
        store.search("plain", Keywords(query_vector("words", ANALYZER)), 3)


def test_bad_terms_and_weights_are_refused_before_anything_is_sent(store: Store) -> None:
    _fill(store)
    with pytest.raises(StoreError, match="repeated indices"):
        Point(point_id(5), np.ones(DIM), {}, terms=SparseVector([3, 3], [1.0, 1.0]))
    with pytest.raises(StoreError, match="unsigned 32-bit"):
        Point(point_id(5), np.ones(DIM), {}, terms=SparseVector([2**32], [1.0]))
    with pytest.raises(StoreError, match="NaN"):
        store.search("c", Keywords(SparseVector([1], [float("nan")])), 3)
    with pytest.raises(StoreError, match="keyword weight"):
        store.search(
            "c", Fused(Dense(np.ones(DIM)), Keywords(query_vector("revenue", ANALYZER)), weight=-1), 3
        )


def test_scrolls_leave_the_text_out_unless_asked(store: Store) -> None:
    store.ensure_collection("c", DIM, text=True)
    text = "a long page text " * 100
    store.upsert(
        "c",
        [
            Point(
                point_id(1),
                np.ones(DIM),
                {"doc_id": "d1", "text": text, "text_from": "pdf"},
                terms=document_vector(text, ANALYZER, WEIGHTS),
            )
        ],
    )
    ((_, payload),) = list(store.scroll("c"))
    assert payload == {"doc_id": "d1", "text_from": "pdf"}
    ((_, payload),) = list(store.scroll("c", with_text=True))
    assert payload["text"] == text
    (point,) = list(store.scroll("c", with_vectors=True))
    assert "text" not in point.payload
    # a search brings it: the snippet is made from it
    (hit,) = store.search("c", Keywords(query_vector("page", ANALYZER)), 1)
    assert hit.payload["text"] == text
