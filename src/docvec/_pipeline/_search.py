"""The search stage: a :class:`~docvec.Search` to the pages that answer it (embed the query and analyse its
terms, ask the store one query, read the pages it finds with their snippets), and a
:class:`~docvec.SearchFilter` to the store's :class:`Filter`."""

from __future__ import annotations

import dataclasses
import os
from typing import get_args

from .._errors import ConflictError, InputError
from .._model._embedder import Embedder
from .._records import Hit, ModeChoice, PagePayload, Search, SearchFilter, SearchMode, TextIndex, mode_parts
from .._store import Dense, Filter, Fused, Hybrid, Keywords, MaxSim, Store, StoreQuery
from .._text._snippet import Snippet, snippet
from .._text._terms import query_vector
from ._documents import sources_named

__all__ = ["Found", "choose_mode", "search", "to_store_filter"]


@dataclasses.dataclass(frozen=True)
class Found:
    """A page a search found: what is stored of it, its score, what the search says of it (a snippet of
    its text, the whole text when asked for), and the reranker's score when a second stage read it."""

    page: PagePayload
    score: float
    snippet: Snippet | None = None
    text: str | None = None
    rerank_score: float | None = None

    def hit(self) -> Hit:
        """The hit a caller is given for it."""
        return Hit.of_page(
            self.page, self.score, snippet=self.snippet, text=self.text, rerank_score=self.rerank_score
        )


def choose_mode(wanted: ModeChoice, *, multivector: bool, text: bool, collection: str) -> SearchMode:
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
    parts = mode_parts(wanted)
    if parts.text and not text:
        raise ConflictError(
            f"collection {collection!r} keeps no text: search mode {wanted!r} needs a collection with "
            "text (`docvec reindex --text` adds it without embedding any page again)"
        )
    if parts.tokens and not multivector:
        raise ConflictError(
            f"collection {collection!r} is single-vector: search mode {wanted!r} needs a "
            "multi-vector collection (`docvec reindex --multivector` makes one from it)"
        )
    return wanted


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
        page.doc_id
        for _, page in store.pages(collection, Filter(tags=tags), batch=1024)
        if wanted <= set(page.tags)
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
        # a path, or a document's name (an upload's source is its kept copy: its name is the client's)
        sources = (
            _sources_under(store, collection, flt.source)
            if os.path.isabs(flt.source)
            else sources_named(store, collection, flt.source)
        )
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
    request: Search,
    *,
    text: TextIndex | None,
    weight: float = 1.0,
) -> list[Found]:
    """The ``request.k`` pages that best answer ``request``, best first, among those its filter admits;
    never a page of a document still being written (a new version of a file stands in for the old one
    once it is whole).

    ``request.mode`` is the mode the search runs in (:func:`choose_mode` decided it) and
    ``request.prefetch`` the hybrid mode's depth, both set; ``text`` is how the collection keeps its pages'
    text (``None``: it keeps none), ``weight`` the keyword ranking's in a fused mode. A keyword search needs
    no model (``embedder`` may be ``None``). Pages of a collection with text carry a snippet of their text,
    and with ``request.with_text`` the whole text.
    """
    assert request.mode is not None and request.mode != "auto" and request.prefetch is not None, request
    store_flt: Filter | None = Filter(finished=True)
    if request.filter is not None and not request.filter.is_empty:
        store_flt = to_store_filter(store, collection, request.filter)
        if store_flt is None:
            return []
    query = _store_query(embedder, request, text, weight, collection)
    found = store.search(collection, query, request.k, store_flt)
    return [_found(PagePayload.model_validate(p.payload), p.score, request, text) for p in found]


def _store_query(
    embedder: Embedder | None, request: Search, text: TextIndex | None, weight: float, collection: str
) -> StoreQuery:
    """The one query the store is asked for ``request``'s mode."""
    mode: SearchMode = request.mode  # type: ignore[assignment]  # set by the caller: see search()
    parts = mode_parts(mode)
    keywords = None
    if parts.text:
        if text is None:
            raise ConflictError(f"collection {collection!r} keeps no text: search mode {mode!r} needs it")
        keywords = Keywords(query_vector(request.query, text.analyzer))
    if parts.visual is None:
        assert keywords is not None
        return keywords
    if embedder is None:
        raise InputError(f"search mode {mode!r} needs the model")
    visual: Dense | MaxSim | Hybrid
    prefetch = request.prefetch or 1
    if parts.visual == "dense":
        visual = Dense(embedder.embed_queries([request.query])[0])
    else:
        dense, tokens = embedder.embed_queries_multi([request.query])
        visual = Hybrid(dense[0], tokens[0], prefetch) if parts.visual == "hybrid" else MaxSim(tokens[0])
    if keywords is None:
        return visual
    # a fused search reads this many of each ranking's best pages: the hybrid prefetch's depth
    return Fused(visual, keywords, depth=max(prefetch, request.k), weight=weight)


def _found(page: PagePayload, score: float, request: Search, text: TextIndex | None) -> Found:
    if text is None or page.text is None:
        return Found(page, score)
    shown = snippet(page.text, request.query, text.analyzer)
    return Found(page, score, shown, page.text if request.with_text else None)
