"""The batch-query flow's files: a batch of searches in one, their results in another.

The queries file holds one query a line, or JSON Lines of searches (``{"query": ..., "k": ...}`` and any
other field of :class:`docvec.Search`: ``filter``, ``mode``, ``with_text``, ``rerank``; a line starting
with ``{`` is read as JSON); blank lines are skipped. The results file gets one :class:`docvec.SearchResult`
a line (``{"query", "k", "mode", "rerank", "hits"}``, as ``POST /search`` answers), written in one go.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from docvec import InputError, Search


def read_queries(path: Path, **defaults: Any) -> list[Search]:
    """The searches of a plain or JSON Lines file, each checked as every face checks a search (what a line
    leaves unsaid: ``defaults``, e.g. ``k``, ``with_text``, ``rerank``): :class:`docvec.InputError` names
    the first bad line (cheap: the flow checks the whole batch before it loads a model)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the queries: {e}", item=str(path)) from None
    searches: list[Search] = []
    for n, line in enumerate(text.splitlines(), start=1):
        given = line.strip()
        if not given:
            continue
        fields: dict[str, Any] = {"query": given}
        if given.startswith("{"):
            try:
                fields = json.loads(given)
                if not isinstance(fields, dict) or "query" not in fields:
                    raise TypeError
            except (ValueError, TypeError):
                raise InputError(
                    f"line {n}: expected a query, or a search as JSON ({{'query': ..., 'k': ...}})",
                    item=str(path),
                ) from None
        try:
            searches.append(Search.of(fields.pop("query", ""), **{**defaults, **fields}))
        except InputError as e:
            raise InputError(f"line {n}: {e.reason}", item=str(path)) from None
    return searches


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
