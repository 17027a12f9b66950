"""Search latency, measured side by side in one run.

    python benchmarks/bench_search.py [--model DIR] [--sizes 1000,10000,100000] [--queries 100]
                                      [--data random|lowrank|both] [--clients 8] [--seconds 10]

Prints p50/p95 of the two parts of a query apart:

- embedding the query text (the tiny test model by default, or --model);
- the embedded store's search (qdrant-edge, top 10) over 1k, 10k and 100k synthetic unit vectors of 2048
  numbers (jina-v4's size), beside a numpy brute-force scan of the same float32 vectors (the exact-search
  floor), with the ratio store/numpy and the store's recall@10 against numpy's exact top 10. Each size is
  measured twice: as written (a float16 scan) and after Store.optimize(), which every ingest run ends
  with (a scan of the int8 copy, rescored; see docvec._store._core). The target column applies the issue's
  rule: within 2x of the floor, or below it with recall@10 >= 0.95;
- multi-vector collections (``--multi``, on by default): p50 of ``multi`` (exact MaxSim over every page) and
  ``hybrid`` (dense prefetch of N pages, MaxSim rerank) at 1k and 10k pages of synthetic low-rank token
  vectors (790 tokens a page: 768 image tokens and the prompt's, as jina-v4 gives at its page budget; 12
  a query), beside a numpy MaxSim scan of the same float32 vectors (the floor) and the dense search on the
  same pages, and the same hybrid search done in numpy (float32 in RAM: the dense top N, then their MaxSim);
  recall@10 of multi and hybrid against numpy's exhaustive MaxSim; bytes per page on disk and in RAM;
  with and without token pooling (2 tokens to 1);
- requests/s of POST /search under concurrent local load.

Two kinds of synthetic vectors: uniform random ones (no neighbourhood structure: the near-ties of their
top 10 are the hardest case for any approximation), and vectors near a 32-d subspace, closer to real
embeddings (low intrinsic dimension). ``--data both`` (the default) runs one after the other.
"""

from __future__ import annotations

import argparse
import os

# OpenBLAS sizes its thread pool from the host's CPU count, not this process's share of it; oversubscribed,
# a 1000-row scan took 8 ms instead of 0.3 ms here, which would flatter the store. Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(len(os.sched_getaffinity(0))))

import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

DIM = 2048
K = 10
QUERIES = [
    "total amount due on the invoice",
    "quarterly revenue by region chart",
    "signature page of the contract",
    "table of contents",
    "patient discharge summary",
    "wiring diagram for the pump",
    "balance sheet 2023",
    "list of figures",
]


def pct(samples: list[float]) -> tuple[float, float]:
    """(p50, p95) in milliseconds."""
    a = np.asarray(samples) * 1e3
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def time_each(fn: Callable[[Any], Any], inputs: Sequence[Any] | npt.NDArray[Any]) -> list[float]:
    """Wall seconds of ``fn(x)`` for each ``x`` of ``inputs``, after one warm-up call."""
    fn(inputs[0])
    out = []
    for x in inputs:
        t = time.perf_counter()
        fn(x)
        out.append(time.perf_counter() - t)
    return out


def time_pair(
    a: Callable[[Any], Any], b: Callable[[Any], Any], inputs: Sequence[Any] | npt.NDArray[Any]
) -> tuple[list[float], list[float]]:
    """:func:`time_each` of ``a`` and ``b``, alternating per input: on a shared machine a burst of
    background load then slows both sides alike instead of skewing their ratio."""
    a(inputs[0])
    b(inputs[0])
    ta, tb = [], []
    for x in inputs:
        t = time.perf_counter()
        a(x)
        ta.append(time.perf_counter() - t)
        t = time.perf_counter()
        b(x)
        tb.append(time.perf_counter() - t)
    return ta, tb


def unit(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def bench_embedding(model: str | None, n: int) -> None:
    from docvec import Embedder, EmbedSettings, Settings
    from docvec._tools._tiny import build_tiny_model

    s = Settings()
    if model is None:
        files = build_tiny_model(s.cache_dir / "models" / "tiny", cache_dir=s.cache_dir)
        emb = Embedder(files, EmbedSettings(threads=s.embed.threads))
        name = "tiny"
    else:
        emb = Embedder.open(model, s.embed)
        name = model
    with emb:
        texts = [f"{QUERIES[x % len(QUERIES)]} {x}" for x in range(n)]  # distinct: no cache can help
        times = time_each(lambda text: emb.embed_queries([text]), texts)
    p50, p95 = pct(times)
    print(f"query embedding ({name}): p50 {p50:.2f} ms, p95 {p95:.2f} ms  ({n} queries)")


def exact_top(data: npt.NDArray[np.float32], q: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.int64]:
    """Indices of the ``k`` highest dot products, best first: what an exact cosine search returns."""
    scores = data @ q
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def recall(store: Any, data: npt.NDArray[np.float32], queries: npt.NDArray[np.float32]) -> float:
    """Mean recall@K of the store's collection "bench" (point i holds ``data[i]``) against the exact
    float32 top K of each query."""
    from docvec._store import point_id

    ids = {point_id("bench", x): x for x in range(len(data))}
    found = []
    for q in queries:
        got = {ids[h.id] for h in store.search("bench", q, K)}
        found.append(len(got & set(exact_top(data, q, K).tolist())) / K)
    return float(np.mean(found))


def low_rank(rng: np.random.Generator, n: int, basis: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Unit vectors near a low-dimensional subspace (``basis`` rows), plus a little full-rank noise.

    Real embeddings have a low intrinsic dimension, which is what lets an HNSW graph find true
    neighbours; uniform random vectors have none, so they show an index's worst case.
    """
    z = rng.standard_normal((n, basis.shape[0])).astype(np.float32)
    v = z @ basis + 0.05 * rng.standard_normal((n, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def verdict(ratio: float, rec: float) -> str:
    """The issue's target: within 2x of the exact floor, or below it with recall@K >= 0.95."""
    ok = (ratio <= 2 and rec >= 0.99) or (ratio < 1 and rec >= 0.95)
    return "ok" if ok else "MISSED"


def bench_store(sizes: list[int], n_queries: int, *, data_kind: str = "random") -> None:
    from docvec._store import Point, open_store, point_id

    rng = np.random.default_rng(0)
    biggest = max(sizes)
    if data_kind == "random":
        queries, data = unit(rng, n_queries), unit(rng, biggest)
        what = "random unit vectors"
    else:
        basis = rng.standard_normal((32, DIM)).astype(np.float32) / np.sqrt(32)
        queries, data = low_rank(rng, n_queries, basis), low_rank(rng, biggest, basis)
        what = "unit vectors near a 32-d subspace"
    print(f"\nstore search, top {K}, {DIM}-d {what}, {n_queries} queries")
    print(
        f"{'points':>8} {'store p50':>10} {'p95':>8} {'numpy p50':>10} {'p95':>8} {'store/numpy':>12} "
        f"{'recall@' + str(K):>10} {'target':>7}"
    )
    for n in sizes:
        root = Path(tempfile.mkdtemp(prefix="docvec-bench-search-"))
        try:
            with open_store(path=root) as store:
                store.ensure_collection("bench", DIM)
                t = time.perf_counter()
                for start in range(0, n, 2000):
                    # payloads shaped like docvec's (indexed keyword fields), built per chunk to bound memory
                    chunk = [
                        Point(
                            point_id("bench", i),
                            data[i],
                            {"doc_id": f"d{i // 10}", "source": f"/docs/{i // 10}.pdf", "page": i % 10 + 1},
                        )
                        for i in range(start, min(start + 2000, n))
                    ]
                    store.upsert("bench", chunk)
                store.flush()
                load_s = time.perf_counter() - t
                sub = data[:n]
                # Twice: as written (a float16 scan: what a search sees during an ingest run), then after
                # optimize(), which every ingest run ends with (the int8 scan, rescored).
                for stage in ("written", "optimized"):
                    if stage == "optimized":
                        t = time.perf_counter()
                        store.optimize("bench")
                        note = f"int8 scan + rescore; optimize() took {time.perf_counter() - t:.1f} s"
                    else:
                        note = f"float16 scan; loaded in {load_s:.1f} s"
                    st, nt = time_pair(
                        partial(store.search, "bench", k=K), partial(exact_top, sub, k=K), queries
                    )
                    (s50, s95), (n50, n95) = pct(st), pct(nt)
                    rec = recall(store, sub, queries)
                    print(
                        f"{n:>8} {s50:>8.2f}ms {s95:>6.2f}ms {n50:>8.2f}ms {n95:>6.2f}ms {s50 / n50:>11.2f}x "
                        f"{rec:>10.3f} {verdict(s50 / n50, rec):>7}   ({note})"
                    )
        finally:
            shutil.rmtree(root, ignore_errors=True)


TOKEN_DIM = 128
PAGE_TOKENS = 790
QUERY_TOKENS = 12


def _tokens_like_pages(
    rng: np.random.Generator, n: int, count: int, basis: npt.NDArray[np.float32], topics: int
) -> npt.NDArray[np.float32]:
    """``n`` sets of ``count`` unit token vectors: each set is about ``topics`` subjects (directions in the
    span of a shared low-dimensional ``basis``), each token about one of them, plus noise. Pages about the
    same subjects resemble each other, and a query is about a subject or two."""
    subjects = rng.standard_normal((n, topics, basis.shape[0])).astype(np.float32) @ basis
    subjects /= np.linalg.norm(subjects, axis=2, keepdims=True)
    pick = rng.integers(0, topics, size=(n, count))
    v = np.take_along_axis(subjects, pick[:, :, None], axis=1)
    v = v + 0.08 * rng.standard_normal((n, count, TOKEN_DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=2, keepdims=True)
    return v.astype(np.float32)


def _maxsim_top(
    pages: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int
) -> npt.NDArray[np.int64]:
    """numpy's exact MaxSim top ``k``: every page's tokens against the query's, best per query token,
    summed (float32, all cores)."""
    scores = np.einsum("ptd,qd->pqt", pages, query, optimize=True).max(axis=2).sum(axis=1)
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def _maxsim_at(pages: npt.NDArray[np.float32], queries: npt.NDArray[np.float32], q: int) -> Any:
    return _maxsim_top(pages, queries[q], K)


def _numpy_hybrid(
    pages: npt.NDArray[np.float32],
    dense: npt.NDArray[np.float32],
    queries: npt.NDArray[np.float32],
    qdense: npt.NDArray[np.float32],
    n: int,
    q: int,
) -> Any:
    """The hybrid search in numpy, float32: the dense vectors' best ``n`` pages, reranked by MaxSim."""
    best = np.argpartition(-(dense @ qdense[q]), n)[:n]
    return best[_maxsim_top(pages[best], queries[q], K)]


def _folder_bytes(root: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in root.rglob("*") if f.is_file())


def bench_multivector(sizes: list[int], n_queries: int, prefetch: int) -> None:
    import psutil

    from docvec._model._head import pool_tokens
    from docvec._store import Point, open_store, point_id

    rng = np.random.default_rng(1)
    basis = rng.standard_normal((32, TOKEN_DIM)).astype(np.float32) / np.sqrt(32)
    mixing = rng.standard_normal((TOKEN_DIM, DIM)).astype(np.float32) / np.sqrt(TOKEN_DIM)

    def dense(tokens: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        # a page's dense vector that agrees with its tokens (as a model's mean-pooled one does)
        v = tokens.mean(axis=-2) @ mixing
        return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)

    queries = _tokens_like_pages(rng, n_queries, QUERY_TOKENS, basis, topics=1)
    qdense = dense(queries)
    print(
        f"\nmulti-vector search, top {K}, {PAGE_TOKENS} x {TOKEN_DIM}-d tokens a page (low-rank), "
        f"{QUERY_TOKENS} a query, {n_queries} queries, hybrid prefetch {prefetch}"
    )
    print(
        f"{'pages':>6} {'pool':>4} {'dense p50':>10} {'multi p50':>10} {'hybrid p50':>11} {'numpy p50':>10} "
        f"{'np hybrid':>10} {'multi/numpy':>11} {'hybrid/dense':>12} {'hybrid/np':>9} {'multi recall':>12} "
        f"{'hybrid recall':>13} {'disk/page':>10} {'RAM/page':>9}"
    )
    for n in sizes:
        pages = _tokens_like_pages(rng, n, PAGE_TOKENS, basis, topics=3)
        pdense = dense(pages)
        for pool in (1, 2):
            stored = pages if pool == 1 else np.stack([pool_tokens(p, pool) for p in pages])
            root = Path(tempfile.mkdtemp(prefix="docvec-bench-multi-"))
            proc = psutil.Process()
            try:
                before = proc.memory_info().rss
                with open_store(path=root) as store:
                    store.ensure_collection("bench", DIM, tokens=TOKEN_DIM)
                    for start in range(0, n, 200):
                        chunk = [
                            Point(point_id("bench", i), pdense[i], {"doc_id": f"d{i}"}, stored[i])
                            for i in range(start, min(start + 200, n))
                        ]
                        store.upsert("bench", chunk)
                    store.optimize("bench")
                    store.flush()
                    ids = {point_id("bench", x): x for x in range(n)}
                    args = list(range(n_queries))
                    td = time_each(lambda q: store.search("bench", qdense[q], K), args)
                    tm, tn = time_pair(
                        lambda q: store.search("bench", None, K, tokens=queries[q]),
                        partial(_maxsim_at, stored, queries),
                        args,
                    )
                    th, tnh = time_pair(
                        lambda q: store.search("bench", qdense[q], K, tokens=queries[q], prefetch=prefetch),
                        partial(_numpy_hybrid, stored, pdense, queries, qdense, prefetch),
                        args,
                    )
                    found, found_multi = [], []
                    for q in args:
                        exact = set(_maxsim_top(stored, queries[q], K).tolist())
                        hits = store.search("bench", qdense[q], K, tokens=queries[q], prefetch=prefetch)
                        found.append(len({ids[h.id] for h in hits} & exact) / K)
                        hits = store.search("bench", None, K, tokens=queries[q])
                        found_multi.append(len({ids[h.id] for h in hits} & exact) / K)
                    ram = proc.memory_info().rss - before
                disk = _folder_bytes(root)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            (d50, _), (m50, _), (h50, _), (n50, _), (nh50, _) = pct(td), pct(tm), pct(th), pct(tn), pct(tnh)
            print(
                f"{n:>6} {pool:>4} {d50:>8.2f}ms {m50:>8.2f}ms {h50:>9.2f}ms {n50:>8.2f}ms {nh50:>8.2f}ms "
                f"{m50 / n50:>10.2f}x {h50 / d50:>11.2f}x {h50 / nh50:>8.2f}x {np.mean(found_multi):>12.3f} "
                f"{np.mean(found):>13.3f} {disk / n / 1024:>8.1f}KB {ram / n / 1024:>7.1f}KB"
            )
    print(
        "targets: hybrid at 10k pages within 3x the dense search, hybrid recall@10 >= 0.95, multi within 2x "
        "numpy (RAM/page: this process's RSS growth while the store is open, a lower bound for a cold cache; "
        "np hybrid: the same hybrid search in numpy, float32 in RAM: dense top N, then MaxSim of those N)"
    )


def bench_api(model: str | None, seconds: float, clients: int) -> None:
    import httpx
    import uvicorn

    from docvec import Settings
    from docvec._tools._tiny import build_tiny_model
    from docvec.api import create_app

    data_dir = Path(tempfile.mkdtemp(prefix="docvec-bench-api-"))
    base = Settings()
    if model is None:
        files = build_tiny_model(base.cache_dir / "models" / "tiny", cache_dir=base.cache_dir)
        model = str(files.language_model.parent)
    settings = base.model_copy(update={"data_dir": data_dir, "model": model, "qdrant_url": None})
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(settings), port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                print("\nPOST /search: skipped (the server did not start)")
                return
            time.sleep(0.1)
        with httpx.Client() as c:
            # an index of the shipped samples: the load hits a real collection, not an empty one
            from docvec._cli._demo import sample_documents

            for f in sorted(sample_documents().iterdir()):
                if f.suffix in {".pdf", ".png"}:
                    with f.open("rb") as fh:
                        c.post(f"{url}/documents", files={"file": (f.name, fh)}, timeout=120)
            pages = c.get(f"{url}/healthz").json().get("pages")
        done: list[float] = []
        errors = [0]
        stop = time.monotonic() + seconds

        def client(n: int) -> None:
            with httpx.Client(base_url=url, timeout=60) as c:
                while time.monotonic() < stop:
                    t = time.perf_counter()
                    r = c.post("/search", json={"query": QUERIES[n % len(QUERIES)], "top_k": 5})
                    if r.status_code == 200:
                        done.append(time.perf_counter() - t)
                    else:
                        errors[0] += 1
                    n += 1

        t0 = time.perf_counter()
        workers = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        wall = time.perf_counter() - t0
        p50, p95 = pct(done) if done else (float("nan"), float("nan"))
        print(
            f"\nPOST /search ({clients} concurrent clients, {wall:.1f} s, {pages} pages indexed): "
            f"{len(done) / wall:.1f} requests/s, latency p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
            f"{errors[0]} errors"
        )
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model for the query embedding (default: the tiny test model)")
    ap.add_argument("--sizes", default="1000,10000,100000", help="indexed points, comma-separated")
    ap.add_argument("--queries", type=int, default=100, help="queries timed per measurement")
    ap.add_argument(
        "--data",
        choices=("random", "lowrank", "both"),
        default="both",
        help="synthetic vectors for the store (default: both, one after the other)",
    )
    ap.add_argument(
        "--multi-sizes", default="1000,10000", help="pages of the multi-vector runs (empty: none)"
    )
    ap.add_argument("--multi-queries", type=int, default=20, help="queries timed per multi-vector run")
    ap.add_argument("--prefetch", type=int, default=100, help="hybrid: pages the dense vector finds")
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients of the API load")
    ap.add_argument("--seconds", type=float, default=10, help="duration of the API load")
    args = ap.parse_args()
    bench_embedding(args.model, args.queries)
    sizes = sorted(int(x) for x in args.sizes.split(","))
    for kind in ("random", "lowrank") if args.data == "both" else (args.data,):
        bench_store(sizes, args.queries, data_kind=kind)
    if args.multi_sizes:
        bench_multivector(
            sorted(int(x) for x in args.multi_sizes.split(",")), args.multi_queries, args.prefetch
        )
    bench_api(args.model, args.seconds, args.clients)


if __name__ == "__main__":
    main()
