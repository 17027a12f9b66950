"""Prefect flow for batch queries: a file of queries in, JSON Lines of hits out; a thin loop over
:meth:`docvec.Index.search`, the call every front end shares.

    python flows/query.py QUERIES OUT [-k 5] [--with-text] [--rerank N]

QUERIES holds one query a line, or JSON Lines of ``{"query": ..., "k": ...}`` (``k`` optional; a line
starting with ``{`` is read as JSON); every line is checked before the model loads. OUT gets one
``{"query", "k", "hits": [...]}`` line per query, each hit as ``docvec search --json`` prints it (with
``--with-text``, each hit's whole page text too, for a RAG pipeline's next step). With ``--rerank N``
(default: DOCVEC_RERANK; 0: off) the reranker (DOCVEC_RERANK_MODEL) reads each query's best N pages
again and orders them: each hit has its ``rerank_score`` and the line says ``"rerank": N``. Settings
come from DOCVEC_* variables as for the CLI; the model is loaded once for the whole batch. Deployed with
prefect.yaml as `docvec-query/batch`, it runs on demand on a worker (docs/prefect.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

# the flows' own modules: this file's folder is on sys.path when it runs as a script and when Prefect loads
# it as a deployment's entrypoint
import _offline  # noqa: F401  (before prefect: telemetry off)
from _limits import hold_slots
from _queries import read_queries, write_results
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from docvec import DocvecError, IndexLike, InputError, Settings, connect


def check_rerank(items: list[tuple[str, int]], rerank: int) -> None:
    """:class:`docvec.InputError` naming the first query whose ``k`` is over ``rerank`` (the reranker
    orders each query's best ``rerank`` pages and the search returns ``k`` of them); the range of
    ``rerank`` is the search's own check."""
    for n, (_, k) in enumerate(items, start=1):
        if 0 < rerank < k:
            raise InputError(f"query {n}: rerank ({rerank}) is below its k ({k}); ask for rerank >= k")


@task(cache_policy=NO_CACHE)
def load_queries(path: str, default_k: int, rerank: int = 0) -> list[tuple[str, int]]:
    """Read the batch's queries (every line checked, and its k against ``rerank``)."""
    items = read_queries(Path(path), default_k)
    check_rerank(items, rerank)
    return items


# a live handle (the index) is an input: nothing to cache
@task(cache_policy=NO_CACHE)
def run_query(
    index: IndexLike, query: str, k: int, with_text: bool = False, rerank: int | None = None
) -> dict[str, Any]:
    """One query's hits, in the JSON form of `docvec search --json` (reranked: ``rerank`` > 0; None: as
    DOCVEC_RERANK says)."""
    hits = index.search(query, k, with_text=with_text, rerank=rerank)
    row: dict[str, Any] = {"query": query, "k": k}
    if rerank:
        row["rerank"] = rerank
    return {**row, "hits": [h.model_dump(mode="json") for h in hits]}


@flow(name="docvec-query")
def query_flow(queries: str, out: str, k: int = 5, with_text: bool = False, rerank: int | None = None) -> int:
    """Run every query in the file ``queries`` and write JSON Lines of hits to ``out`` (with each hit's
    whole page text: ``with_text``; reordered by the reranker, which reads each query's best ``rerank``
    pages: ``rerank``, default ``DOCVEC_RERANK``, 0 none); returns the count."""
    settings = Settings()
    items = load_queries(queries, k, rerank or 0)  # a bad line fails the run before the model loads
    # overlapping runs wait here for their turn (flows/_limits.py)
    with hold_slots(settings), connect(settings, notify=get_run_logger().info) as index:
        rows = [run_query(index, q, qk, with_text, rerank) for q, qk in items]
    return write_results(Path(out), rows)  # in one go: a failed batch leaves no half-written file


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="docvec batch query flow")
    ap.add_argument("queries", help="file of queries: one a line, or JSON Lines {query, k}")
    ap.add_argument("out", help="JSON Lines output file")
    ap.add_argument("-k", type=int, default=5, help="pages per query when a line gives no k")
    ap.add_argument("--with-text", action="store_true", help="each hit's whole page text too (RAG)")
    ap.add_argument(
        "--rerank",
        type=int,
        metavar="N",
        help="rerank each query's best N pages (N >= k; 0: off; default: DOCVEC_RERANK)",
    )
    args = ap.parse_args()
    try:
        # a bad line: one line here, not a flow run's traceback
        check_rerank(read_queries(Path(args.queries), args.k), args.rerank or 0)
    except DocvecError as e:
        raise SystemExit(f"error: {e}") from None
    count = query_flow(args.queries, args.out, args.k, args.with_text, args.rerank)
    print(f"{count} queries -> {args.out}")
