"""A batch of queries in a file, and its results in another: what the batch-query flow reads and writes.

The queries file holds one query a line, or JSON Lines of ``{"query": ..., "k": ...}`` (``k`` optional; a
line starting with ``{`` is read as JSON); blank lines are skipped. The results file gets one JSON object
a line, written in one go at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ._errors import InputError
from ._fileio import write_atomic
from ._records import check_k

__all__ = ["read_queries", "write_results"]


def read_queries(path: Path, default_k: int) -> list[tuple[str, int]]:
    """(query, k) pairs from a plain or JSON Lines file, every one checked: :class:`InputError` names
    the first bad line (cheap: callers check the whole batch before loading a model)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the queries: {e}", item=str(path)) from None
    items: list[tuple[str, int]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        query = line.strip()
        if not query:
            continue
        k: object = default_k
        if query.startswith("{"):
            try:
                row = json.loads(query)
                query, k = str(row["query"]).strip(), row.get("k", default_k)
            except (ValueError, KeyError, TypeError, AttributeError):
                raise InputError(
                    f"line {n}: expected a query, or {{'query': ..., 'k': ...}}", item=str(path)
                ) from None
        try:
            check_k(k)
        except InputError as e:
            raise InputError(f"line {n}: {e.reason}", item=str(path)) from None
        if not query:
            raise InputError(f"line {n}: the query is empty", item=str(path))
        items.append((query, int(k)))  # type: ignore[call-overload]
    return items


def write_results(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write ``rows`` as JSON Lines to ``path`` in one go (a failed batch leaves no half-written file);
    returns how many."""
    lines = [json.dumps(r) + "\n" for r in rows]
    write_atomic(Path(path), "".join(lines).encode("utf-8"))
    return len(lines)
