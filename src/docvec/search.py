"""Text-to-page search: one call path (embed the query, search the store) shared by every front end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .embed import Embedder
from .errors import InputError
from .store import Filter, VectorStore

__all__ = ["SearchHit", "search"]


@dataclass(frozen=True)
class SearchHit:
    """One matching page: 1-based page number, cosine score, and the stored payload."""

    doc_id: str
    source: str
    page: int
    score: float
    payload: dict[str, Any]


def search(
    embedder: Embedder,
    store: VectorStore,
    collection: str,
    query: str,
    *,
    k: int = 5,
    flt: Filter | None = None,
) -> list[SearchHit]:
    """The ``k`` pages that best match ``query``, best first."""
    if not 1 <= k <= 100:
        raise InputError(f"k must be between 1 and 100, not {k}")
    vector = embedder.embed_queries([query])[0]
    return [
        SearchHit(
            doc_id=str(h.payload.get("doc_id")),
            source=str(h.payload.get("source")),
            page=int(h.payload.get("page", 0)),
            score=h.score,
            payload=h.payload,
        )
        for h in store.search(collection, vector, k, flt)
    ]
