"""Prefect flow for batch queries: a file of queries in, JSON Lines of hits out; a thin loop over
:meth:`docvec.Index.search`, the call every front end shares.

    python flows/query.py QUERIES OUT [-k 5] [--with-text]

QUERIES holds one query a line, or JSON Lines of ``{"query": ..., "k": ...}`` (``k`` optional; a line
starting with ``{`` is read as JSON); every line is checked before the model loads. OUT gets one
``{"query", "k", "hits": [...]}`` line per query, each hit as ``docvec search --json`` prints it (with
``--with-text``, each hit's whole page text too, for a RAG pipeline's next step). Settings
come from DOCVEC_* variables as for the CLI; the model is loaded once for the whole batch. Deployed with
prefect.yaml as `docvec-query/batch`, it runs on demand on a worker (docs/prefect.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

# the flows' own helper modules, however this file is loaded (a script, a worker, a test)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _offline  # noqa: F401  (before prefect: telemetry off)
from _limits import hold_slots
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from docvec import DocvecError, IndexLike, Settings, connect, read_queries, write_results


@task(cache_policy=NO_CACHE)
def load_queries(path: str, default_k: int) -> list[tuple[str, int]]:
    """Read the batch's queries (every line checked)."""
    return read_queries(Path(path), default_k)


# a live handle (the index) is an input: nothing to cache
@task(cache_policy=NO_CACHE)
def run_query(index: IndexLike, query: str, k: int, with_text: bool = False) -> dict[str, Any]:
    """One query's hits, in the JSON form of `docvec search --json`."""
    hits = index.search(query, k, with_text=with_text)
    return {"query": query, "k": k, "hits": [h.model_dump(mode="json") for h in hits]}


@flow(name="docvec-query")
def query_flow(queries: str, out: str, k: int = 5, with_text: bool = False) -> int:
    """Run every query in the file ``queries`` and write JSON Lines of hits to ``out`` (with each hit's
    whole page text: ``with_text``); returns the count."""
    items = load_queries(queries, k)  # a bad line fails the run before the model loads
    # overlapping runs wait here for their turn (flows/_limits.py)
    with hold_slots(Settings()), connect(Settings(), notify=get_run_logger().info) as index:
        rows = [run_query(index, q, qk, with_text) for q, qk in items]
    return write_results(Path(out), rows)  # in one go: a failed batch leaves no half-written file


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="docvec batch query flow")
    ap.add_argument("queries", help="file of queries: one a line, or JSON Lines {query, k}")
    ap.add_argument("out", help="JSON Lines output file")
    ap.add_argument("-k", type=int, default=5, help="pages per query when a line gives no k")
    ap.add_argument("--with-text", action="store_true", help="each hit's whole page text too (RAG)")
    args = ap.parse_args()
    try:
        read_queries(Path(args.queries), args.k)  # a bad line: one line here, not a flow run's traceback
    except DocvecError as e:
        raise SystemExit(f"error: {e}") from None
    print(f"{query_flow(args.queries, args.out, args.k, args.with_text)} queries -> {args.out}")
