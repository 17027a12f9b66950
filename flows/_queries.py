"""The batch-query flow's files: a batch of queries in one, its results in another.

The queries file holds one query a line, or JSON Lines of ``{"query": ..., "k": ...}`` (``k`` optional; a
line starting with ``{`` is read as JSON); blank lines are skipped. The results file gets one JSON object
a line, written in one go at the end.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from docvec import InputError, check_k


def read_queries(path: Path, default_k: int) -> list[tuple[str, int]]:
    """(query, k) pairs from a plain or JSON Lines file, every one checked: :class:`docvec.InputError`
    names the first bad line (cheap: the flow checks the whole batch before it loads a model)."""
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
            checked = check_k(k)
        except InputError as e:
            raise InputError(f"line {n}: {e.reason}", item=str(path)) from None
        if not query:
            raise InputError(f"line {n}: the query is empty", item=str(path))
        items.append((query, checked))
    return items


def write_results(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write ``rows`` as JSON Lines to ``path`` in one go, through a temporary file beside it that
    replaces it (a failed batch leaves no half-written file); returns how many."""
    path = Path(path)
    lines = [json.dumps(r) + "\n" for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write("".join(lines).encode("utf-8"))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return len(lines)
