"""Prefect flow for batch queries: a file of queries in, JSON Lines of hits out; a thin loop over
:meth:`docvec.Index.search`, the call every front end shares.

    python flows/query.py QUERIES OUT [-k 5]

QUERIES holds one query a line, or JSON Lines of ``{"query": ..., "k": ...}`` (``k`` optional; a line
starting with ``{`` is read as JSON). OUT gets one ``{"query", "k", "hits": [...]}`` line per query, each hit
``{doc_id, source, page, score, tags}`` as ``docvec search --json`` prints it. Settings come from DOCVEC_*
variables as for the CLI; the model is loaded once for the whole batch.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from docvec import Index, InputError, Settings
from docvec._fileio import write_atomic


def read_queries(path: Path, default_k: int) -> list[tuple[str, int]]:
    """(query, k) pairs from a plain or JSON Lines file; blank lines are skipped."""
    items: list[tuple[str, int]] = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if not text:
            continue
        if text.startswith("{"):
            try:
                row = json.loads(text)
                query, k = str(row["query"]), int(row.get("k", default_k))
            except (ValueError, KeyError, TypeError):
                raise InputError(f"{path} line {n}: expected {{'query': ..., 'k': ...}}") from None
            items.append((query, k))
        else:
            items.append((text, default_k))
    return items


@task(cache_policy=NO_CACHE)
def load_queries(path: str, default_k: int) -> list[tuple[str, int]]:
    """Read the batch's queries."""
    return read_queries(Path(path), default_k)


# a live handle (the index) is an input: nothing to cache
@task(cache_policy=NO_CACHE)
def run_query(index: Index, query: str, k: int) -> dict[str, Any]:
    """One query's hits, in the JSON form of `docvec search --json`."""
    return {"query": query, "k": k, "hits": [h.model_dump(mode="json") for h in index.search(query, k)]}


@flow(name="docvec-query")
def query_flow(queries: str, out: str, k: int = 5) -> int:
    """Run every query in the file ``queries`` and write JSON Lines of hits to ``out``; returns the count."""
    items = load_queries(queries, k)
    with Index.open(Settings()) as index:
        rows = [run_query(index, q, qk) for q, qk in items]
    # written at the end, in one go: a failed batch leaves no half-written output behind
    write_atomic(Path(out), "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8"))
    return len(rows)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="docvec batch query flow")
    ap.add_argument("queries", help="file of queries: one a line, or JSON Lines {query, k}")
    ap.add_argument("out", help="JSON Lines output file")
    ap.add_argument("-k", type=int, default=5, help="pages per query when a line gives no k")
    args = ap.parse_args()
    print(f"{query_flow(args.queries, args.out, args.k)} queries -> {args.out}")
