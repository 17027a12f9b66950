"""The second stage of a search: the reranker reads the query with each of the first stage's best pages
(their stored images) and the hits are ordered by its scores."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np

from .._errors import NotFoundError
from .._model._reranker import Reranker
from .._store import PageStore
from ._search import Found

__all__ = ["rerank"]

log = logging.getLogger("docvec")


def rerank(reranker: Reranker, pages: PageStore, query: str, found: list[Found], k: int) -> list[Found]:
    """The ``k`` best of ``found`` by the reranker's score of (``query``, the page's stored image), best
    first, each with its ``rerank_score``; equal scores keep the first stage's order.

    A page whose image is gone from the page store (collected while the search ran) cannot be read: it
    keeps no rerank score and follows the scored pages, with a warning.
    """
    images: list[Path] = []
    scored: list[Found] = []
    unread: list[Found] = []
    for one in found:
        try:
            images.append(pages.path(one.page.image))
        except NotFoundError:
            log.warning("page %d of %s: its image is gone; not reranked", one.page.page, one.page.source)
            unread.append(one)
            continue
        scored.append(one)
    scores = reranker.score(query, images) if images else np.zeros(0)
    order = sorted(range(len(scored)), key=lambda i: -scores[i])
    ranked = [dataclasses.replace(scored[i], rerank_score=float(scores[i])) for i in order]
    return (ranked + unread)[:k]
