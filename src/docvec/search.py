"""Text-to-page search: one call path (embed the query, search the store) shared by every front end."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .embed import Embedder
from .errors import InputError
from .store import Filter, VectorStore

__all__ = ["SearchFilter", "SearchHit", "search", "to_store_filter"]


@dataclass(frozen=True)
class SearchHit:
    """One matching page: 1-based page number, cosine score, and the stored payload."""

    doc_id: str
    source: str
    page: int
    score: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class SearchFilter:
    """Which pages a search may return: one document, sources under a path prefix, and tags.

    Every given condition must hold; ``tags`` are ``"key=value"`` strings and a page must carry all of
    them. An empty filter (the default) matches every page.
    """

    doc_id: str | None = None
    source_prefix: str | None = None
    tags: tuple[str, ...] = ()

    @classmethod
    def parse(cls, items: Iterable[str]) -> SearchFilter:
        """Build a filter from ``key=value`` strings as given to ``--filter``: ``doc_id=...``,
        ``source=...`` (a path prefix, made absolute like the stored sources), anything else a tag;
        raises :class:`InputError` on a malformed one."""
        doc_id: str | None = None
        prefix: str | None = None
        tags: list[str] = []
        for item in items:
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key or not value:
                raise InputError(f"filter {item!r} is not of the form key=value")
            if key == "doc_id":
                if doc_id is not None and doc_id != value:
                    raise InputError(f"filter doc_id given twice ({doc_id!r} and {value!r})")
                doc_id = value
            elif key == "source":
                value = _absolute_prefix(value)
                if prefix is not None and prefix != value:
                    raise InputError(f"filter source given twice ({prefix!r} and {value!r})")
                prefix = value
            else:
                tags.append(f"{key}={value}")
        return cls(doc_id=doc_id, source_prefix=prefix, tags=tuple(sorted(set(tags))))

    @property
    def is_empty(self) -> bool:
        """True when the filter has no condition."""
        return self.doc_id is None and self.source_prefix is None and not self.tags


def _absolute_prefix(prefix: str) -> str:
    # Sources are stored as absolute paths, so "~/papers" or "docs/" must be made absolute to match; a
    # trailing separator is kept, since "docs/" (that folder) and "docs" (also "docs-old/...") differ.
    absolute = os.path.abspath(os.path.expanduser(prefix))
    if prefix.endswith(os.sep) and not absolute.endswith(os.sep):
        absolute += os.sep
    return absolute


def _sources_under(store: VectorStore, collection: str, prefix: str) -> tuple[str, ...]:
    """The distinct ``source`` values in ``collection`` that start with ``prefix``.

    The store protocol has no prefix match (Qdrant keyword indexes match whole values), so the sources are
    listed by scrolling payloads and the search then asks for exactly those. This costs one scroll of
    the collection per prefixed search: fine for thousands of documents, slow for millions, where a
    dedicated (e.g. path-component) payload index would be the fix. Filtering hits after an over-fetch
    would be cheaper but can return fewer than ``k`` hits even when ``k`` matching pages exist.
    """
    found: set[str] = set()
    for _, payload in store.scroll(collection, batch=1024):
        src = payload.get("source")
        if isinstance(src, str) and src.startswith(prefix):
            found.add(src)
    return tuple(sorted(found))


def _docs_with_all_tags(store: VectorStore, collection: str, tags: tuple[str, ...]) -> set[str]:
    """The doc_ids of pages that carry every one of ``tags``.

    :class:`Filter` matches *any* listed tag, and a user filtering on two tags means both; the store
    narrows the scroll to pages with at least one of them, the rest is checked here. Tags are given per
    ingest run, so all pages of a document carry the same tags and a document-level answer is exact.
    """
    wanted = set(tags)
    return {
        str(payload.get("doc_id"))
        for _, payload in store.scroll(collection, Filter(tags=tags), batch=1024)
        if wanted <= set(payload.get("tags") or ())
    }


def to_store_filter(store: VectorStore, collection: str, flt: SearchFilter) -> Filter | None:
    """Translate ``flt`` into the store's :class:`Filter`; ``None`` when it matches nothing at all.

    An empty :class:`Filter` field means "no condition", so a prefix or tag set that matches nothing
    must short-circuit rather than become an empty tuple.
    """
    doc_ids: tuple[str, ...] = (flt.doc_id,) if flt.doc_id is not None else ()
    sources: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    if flt.source_prefix is not None:
        sources = _sources_under(store, collection, flt.source_prefix)
        if not sources:
            return None
    if len(flt.tags) == 1:
        tags = flt.tags
    elif flt.tags:
        docs = _docs_with_all_tags(store, collection, flt.tags)
        if flt.doc_id is not None:
            docs &= {flt.doc_id}
        if not docs:
            return None
        doc_ids = tuple(sorted(docs))
    return Filter(doc_ids=doc_ids, sources=sources, tags=tags)


def search(
    embedder: Embedder,
    store: VectorStore,
    collection: str,
    query: str,
    *,
    k: int = 5,
    flt: Filter | SearchFilter | None = None,
) -> list[SearchHit]:
    """The ``k`` pages that best match ``query``, best first, among those ``flt`` admits.

    Raises :class:`InputError` for a ``k`` outside 1..100 or an empty query.
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
        raise InputError(f"k must be between 1 and 100, not {k}")
    if not query.strip():
        raise InputError("the query is empty")
    store_flt: Filter | None
    if isinstance(flt, SearchFilter):
        if flt.is_empty:
            store_flt = None
        else:
            store_flt = to_store_filter(store, collection, flt)
            if store_flt is None:
                return []
    else:
        store_flt = flt
    vector = embedder.embed_queries([query])[0]
    return [
        SearchHit(
            doc_id=str(h.payload.get("doc_id")),
            source=str(h.payload.get("source")),
            page=int(h.payload.get("page", 0)),
            score=h.score,
            payload=h.payload,
        )
        for h in store.search(collection, vector, k, store_flt)
    ]
