"""Prefect flow for batch queries: a file of searches in, JSON Lines of results out; a thin loop over
:meth:`docvec.Index.search`, the call every front end shares.

    python flows/query.py QUERIES OUT [-k 5] [--with-text] [--rerank N]

QUERIES holds one query a line, or JSON Lines of searches (``{"query": ..., "k": ...}`` and any field of
:class:`docvec.Search`: ``filter``, ``mode``, ``with_text``, ``rerank``; a line starting with ``{`` is read
as JSON); every line is checked before the model loads. OUT gets one result a line, as ``POST /search``
answers: ``{"query", "k", "mode", "rerank", "hits": [...]}``, each hit as ``docvec search --json`` prints
it (with ``--with-text``, each hit's whole page text too, for a RAG pipeline's next step). With
``--rerank N`` (default: DOCVEC_RERANK; 0: off) the reranker (DOCVEC_RERANK_MODEL) reads each query's best
N pages again and orders them: each hit has its ``rerank_score`` and the line says ``"rerank": N``. The
options are the defaults of lines that say nothing of them. Settings come from DOCVEC_* variables as for
the CLI; the model is loaded once for the whole batch. Deployed with prefect.yaml as `docvec-query/batch`,
it runs on demand on a worker (docs/prefect.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

# the flows' own modules: this file's folder is on sys.path when it runs as a script and when Prefect loads
# it as a deployment's entrypoint
import _offline  # noqa: F401  (before prefect: telemetry off)
import _states  # noqa: F401  (a bad line is one line in the run's log, not a traceback)
from _limits import hold_slots
from _queries import read_queries, write_results
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from docvec import DocvecError, IndexLike, Search, Settings, connect


def _defaults(k: int, with_text: bool, rerank: int | None) -> dict[str, Any]:
    """What the flow's options say for the lines that say nothing of them."""
    return {"k": k, "with_text": with_text, **({"rerank": rerank} if rerank is not None else {})}


@task(cache_policy=NO_CACHE)
def load_queries(path: str, k: int, with_text: bool = False, rerank: int | None = None) -> list[Search]:
    """Read the batch's searches, every line checked as a search is (its k against its rerank too)."""
    return read_queries(Path(path), **_defaults(k, with_text, rerank))


# a live handle (the index) is an input: nothing to cache
@task(cache_policy=NO_CACHE)
def run_query(index: IndexLike, search: Search) -> dict[str, Any]:
    """One search's result, in the JSON form ``POST /search`` answers (its hits as `docvec search --json`
    prints them, the mode and the reranker's depth that answered)."""
    return index.search(search).model_dump(mode="json")


@flow(name="docvec-query")
def query_flow(queries: str, out: str, k: int = 5, with_text: bool = False, rerank: int | None = None) -> int:
    """Run every search in the file ``queries`` and write JSON Lines of results to ``out`` (with each hit's
    whole page text: ``with_text``; reordered by the reranker, which reads each query's best ``rerank``
    pages: ``rerank``, default ``DOCVEC_RERANK``, 0 none; a line's own fields come first); returns the
    count."""
    settings = Settings()
    searches = load_queries(queries, k, with_text, rerank)  # a bad line fails the run before the model loads
    # overlapping runs wait here for their turn (flows/_limits.py)
    with hold_slots(settings), connect(settings, notify=get_run_logger().info) as index:
        rows = [run_query(index, search) for search in searches]
    return write_results(Path(out), rows)  # in one go: a failed batch leaves no half-written file


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="docvec batch query flow")
    ap.add_argument("queries", help="file of queries: one a line, or JSON Lines of searches {query, k, ...}")
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
        read_queries(Path(args.queries), **_defaults(args.k, args.with_text, args.rerank))
    except DocvecError as e:
        raise SystemExit(f"error: {e}") from None
    count = query_flow(args.queries, args.out, args.k, args.with_text, args.rerank)
    print(f"{count} queries -> {args.out}")
