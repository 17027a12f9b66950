"""The second stage of a search: the reranker reads the query with each of the first stage's best pages
(their stored images) and the hits are ordered by its scores."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from .._errors import NotFoundError
from .._model._reranker import Reranker
from .._records import Hit
from .._store import PageStore

__all__ = ["rerank"]

log = logging.getLogger("docvec")


def rerank(reranker: Reranker, pages: PageStore, query: str, hits: list[Hit], k: int) -> list[Hit]:
    """The ``k`` best of ``hits`` by the reranker's score of (``query``, the page's stored image), best
    first, each with its ``rerank_score``; equal scores keep the first stage's order.

    A page whose image is gone from the page store (collected while the search ran) cannot be read: it
    keeps no rerank score and follows the scored pages, with a warning.
    """
    images: list[Path] = []
    scored: list[Hit] = []
    unread: list[Hit] = []
    for hit in hits:
        try:
            images.append(pages.path(str(hit.payload.get("image", ""))))
        except NotFoundError:
            log.warning("page %d of %s: its image is gone; not reranked", hit.page, hit.source)
            unread.append(hit)
            continue
        scored.append(hit)
    scores = reranker.score(query, images) if images else np.zeros(0)
    order = sorted(range(len(scored)), key=lambda i: -scores[i])
    ranked = [scored[i].model_copy(update={"rerank_score": float(scores[i])}) for i in order]
    return (ranked + unread)[:k]
