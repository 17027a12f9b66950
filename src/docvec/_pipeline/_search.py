"""The search stage: a text query to the best pages (embed the query and analyse its terms, search the
store, map the hits with their snippets), and a :class:`~docvec.SearchFilter` to the store's
:class:`Filter`."""

from __future__ import annotations

import os
from typing import get_args

from .._errors import ConflictError, InputError
from .._model._embedder import Embedder
from .._records import Hit, SearchFilter, SearchMode, TextIndex, check_k, check_query
from .._store import Filter, ScoredPoint, Store
from .._text._snippet import snippet
from .._text._terms import query_vector

__all__ = ["check_search", "choose_mode", "search", "to_store_filter"]


def check_search(query: str, k: int) -> None:
    """:class:`InputError` for an empty query or a ``k`` outside 1..100; cheap, so callers can check
    before loading a model."""
    check_k(k)
    check_query(query)


def choose_mode(wanted: str, *, multivector: bool, text: bool, collection: str) -> SearchMode:
    """The mode a search asking for ``wanted`` runs in on ``collection`` (``multivector``: whether it keeps
    token vectors; ``text``: whether it keeps its pages' text): ``auto`` is hybrid on a multi-vector
    collection and dense otherwise, fused with text (``hybrid+text``, ``dense+text``) on a collection with
    text; ``multi`` and ``hybrid`` need a multi-vector collection, ``text`` and the fused modes a collection
    with text (:class:`ConflictError` otherwise)."""
    if wanted == "auto":
        visual = "hybrid" if multivector else "dense"
        return f"{visual}+text" if text else visual  # type: ignore[return-value]
    if wanted not in get_args(SearchMode):
        raise InputError(
            f"search mode must be auto or one of {', '.join(get_args(SearchMode))}, not {wanted!r}"
        )
    visual, _, fused = wanted.partition("+")
    if (fused or visual == "text") and not text:
        raise ConflictError(
            f"collection {collection!r} keeps no text: search mode {wanted!r} needs a collection with "
            "text (`docvec reindex --text` adds it without embedding any page again)"
        )
    if visual in ("multi", "hybrid") and not multivector:
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
    embedder: Embedder | None,
    store: Store,
    collection: str,
    query: str,
    *,
    k: int = 5,
    flt: SearchFilter | None = None,
    mode: SearchMode = "dense",
    prefetch: int = 100,
    text: TextIndex | None = None,
    weight: float = 1.0,
    with_text: bool = False,
) -> list[Hit]:
    """The ``k`` pages that best match ``query``, best first, among those ``flt`` admits; never a page of a
    document still being written (a new version of a file stands in for the old one once it is whole).

    ``mode`` scores pages by the dense vector (``dense``), by MaxSim of the query's token vectors over
    every page's (``multi``), or by MaxSim over the ``prefetch`` pages the dense vector finds (``hybrid``,
    one query to the store); the last two need a multi-vector collection and a model with its head. On a
    collection with text (``text``: how it keeps it), ``text`` scores pages by the query's terms in their
    text (no model needed: ``embedder`` may be ``None``), and ``dense+text`` and the like fuse a visual
    ranking with the keyword ranking (reciprocal rank fusion, the keyword ranking weighted ``weight``).
    Hits on a collection with text carry a snippet of their page's text, and with ``with_text`` the whole
    text. Raises :class:`InputError` for a ``k`` outside 1..100 or an empty query.
    """
    check_search(query, k)
    store_flt: Filter | None = Filter(finished=True)
    if flt is not None and not flt.is_empty:
        store_flt = to_store_filter(store, collection, flt)
        if store_flt is None:
            return []
    assert store_flt is not None
    found = _found(embedder, store, collection, query, k, store_flt, mode, prefetch, text, weight)
    return [_hit(p, query, text, with_text) for p in found]


def _found(
    embedder: Embedder | None,
    store: Store,
    collection: str,
    query: str,
    k: int,
    flt: Filter,
    mode: SearchMode,
    prefetch: int,
    text: TextIndex | None,
    weight: float,
) -> list[ScoredPoint]:
    visual, _, fused = mode.partition("+")
    terms = None
    if fused or visual == "text":
        if text is None:
            raise ConflictError(f"collection {collection!r} keeps no text: search mode {mode!r} needs it")
        terms = query_vector(query, text.analyzer)
        if visual == "text":
            return store.search(collection, None, k, flt, terms=terms)
    if embedder is None:
        raise InputError(f"search mode {mode!r} needs the model")
    # a fused search reads this many of each ranking's best pages: the hybrid prefetch's depth
    depth = max(prefetch, k)
    if visual == "dense":
        vector = embedder.embed_queries([query])[0]
        return store.search(collection, vector, k, flt, terms=terms, depth=depth, weight=weight)
    dense, tokens = embedder.embed_queries_multi([query])
    hybrid = visual == "hybrid"
    return store.search(
        collection,
        dense[0] if hybrid else None,
        k,
        flt,
        tokens=tokens[0],
        prefetch=prefetch if hybrid else None,
        terms=terms,
        depth=depth,
        weight=weight,
    )


def _hit(found: ScoredPoint, query: str, text: TextIndex | None, with_text: bool) -> Hit:
    hit = Hit.from_payload(found.payload, found.score)
    page_text = found.payload.get("text")
    if text is None or not isinstance(page_text, str):
        return hit
    shown = snippet(page_text, query, text.analyzer)
    return hit.model_copy(update={"snippet": shown, "text": page_text if with_text else None})
