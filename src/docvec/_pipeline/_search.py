"""The search stage: a text query to the best pages (embed the query, search the store, map the hits),
and a :class:`~docvec.SearchFilter` to the store's :class:`Filter`."""

from __future__ import annotations

import os

from .._errors import ConflictError, InputError
from .._model._embedder import Embedder
from .._records import Hit, SearchFilter, SearchMode, check_k, check_query
from .._store import Filter, Store

__all__ = ["check_search", "choose_mode", "search", "to_store_filter"]


def check_search(query: str, k: int) -> None:
    """:class:`InputError` for an empty query or a ``k`` outside 1..100; cheap, so callers can check
    before loading a model."""
    check_k(k)
    check_query(query)


def choose_mode(wanted: str, *, multivector: bool, collection: str) -> SearchMode:
    """The mode a search asking for ``wanted`` runs in on ``collection`` (``multivector``: whether it keeps
    token vectors): ``auto`` is hybrid on a multi-vector collection and dense otherwise; ``multi`` and
    ``hybrid`` need a multi-vector collection (:class:`ConflictError` otherwise)."""
    if wanted == "auto":
        return "hybrid" if multivector else "dense"
    if wanted not in ("dense", "multi", "hybrid"):
        raise InputError(f"search mode must be auto, dense, multi or hybrid, not {wanted!r}")
    if wanted != "dense" and not multivector:
        raise ConflictError(
            f"collection {collection!r} is single-vector: search mode {wanted!r} needs a "
            "multi-vector collection (`docvec reindex --multivector` makes one from it)"
        )
    return wanted  # type: ignore[return-value]


def _sources_under(store: Store, collection: str, path: str) -> tuple[str, ...]:
    """The distinct ``source`` values in ``collection`` that are ``path`` or lie under it, whole path
    components only (``/docs/a`` takes ``/docs/a/x.pdf``, not ``/docs/ab.pdf``).

    Qdrant's keyword indexes match whole values, so the sources are read from the ``source`` index
    (:meth:`Store.facet`, no scan of the points) and the search then asks for exactly those. Filtering hits
    after an over-fetch would be cheaper but can return fewer than ``k`` hits even when ``k`` matching
    pages exist.
    """
    folder = path if path.endswith(os.sep) else path + os.sep
    return tuple(sorted(s for s in store.facet(collection, "source") if s == path or s.startswith(folder)))


def _docs_with_all_tags(store: Store, collection: str, tags: tuple[str, ...]) -> set[str]:
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


def to_store_filter(store: Store, collection: str, flt: SearchFilter) -> Filter | None:
    """Translate ``flt`` into the store's :class:`Filter`; ``None`` when it matches nothing at all.

    An empty :class:`Filter` field means "no condition", so a prefix or tag set that matches nothing
    must short-circuit rather than become an empty tuple.
    """
    doc_ids: tuple[str, ...] = (flt.doc_id,) if flt.doc_id is not None else ()
    sources: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    if flt.source is not None:
        sources = _sources_under(store, collection, flt.source)
        if not sources:
            return None
    wanted = flt.tag_list
    if len(wanted) == 1:
        tags = wanted
    elif wanted:
        docs = _docs_with_all_tags(store, collection, wanted)
        if flt.doc_id is not None:
            docs &= {flt.doc_id}
        if not docs:
            return None
        doc_ids = tuple(sorted(docs))
    return Filter(doc_ids=doc_ids, sources=sources, tags=tags, finished=True)


def search(
    embedder: Embedder,
    store: Store,
    collection: str,
    query: str,
    *,
    k: int = 5,
    flt: SearchFilter | None = None,
    mode: SearchMode = "dense",
    prefetch: int = 100,
) -> list[Hit]:
    """The ``k`` pages that best match ``query``, best first, among those ``flt`` admits; never a page of a
    document still being written (a new version of a file stands in for the old one once it is whole).

    ``mode`` scores pages by the dense vector (``dense``), by MaxSim of the query's token vectors over
    every page's (``multi``), or by MaxSim over the ``prefetch`` pages the dense vector finds (``hybrid``,
    one query to the store); the last two need a multi-vector collection and a model with its head.
    Raises :class:`InputError` for a ``k`` outside 1..100 or an empty query.
    """
    check_search(query, k)
    store_flt: Filter | None = Filter(finished=True)
    if flt is not None and not flt.is_empty:
        store_flt = to_store_filter(store, collection, flt)
        if store_flt is None:
            return []
    if mode == "dense":
        vector = embedder.embed_queries([query])[0]
        found = store.search(collection, vector, k, store_flt)
    else:
        dense, tokens = embedder.embed_queries_multi([query])
        if mode == "hybrid":
            found = store.search(collection, dense[0], k, store_flt, tokens=tokens[0], prefetch=prefetch)
        else:
            found = store.search(collection, None, k, store_flt, tokens=tokens[0])
    return [Hit.from_payload(h.payload, h.score) for h in found]
