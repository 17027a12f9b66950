"""The store's text: a sparse vector of the page's terms in the same point, Qdrant's IDF, keyword search and
its fusion with each visual query, on the embedded store and the server backend alike."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from docvec import StoreError
from docvec._store import Dense, Filter, Fused, Hybrid, Keywords, MaxSim, Point, ScoredPoint, Store, point_id
from docvec._store._edge import EdgeBackend
from docvec._store._remote import RemoteBackend
from docvec._text._terms import Analyzer, SparseVector, TermWeights, document_vector, query_vector

ANALYZER = Analyzer()
WEIGHTS = TermWeights()
TEXTS = [
    "Invoice INV-2024-0042: total amount due 1,234.56 EUR",
    "Quarterly revenue grew by twelve percent in the north",
    "東京都の人口は約1400万人です",
    "Café au lait and croissants for breakfast",
    "Revenue and costs of the southern region",
]
DIM = 8


@pytest.fixture(params=["edge", "remote"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    backend = EdgeBackend(tmp_path / "edge") if request.param == "edge" else RemoteBackend(":memory:")
    with Store(backend) as s:
        yield s


def _fill(store: Store, *, tokens: bool = False) -> np.ndarray:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(TEXTS) + 1, DIM)).astype(np.float32)
    store.ensure_collection("c", DIM, tokens=4 if tokens else None, text=True)
    points = [
        Point(
            point_id(i),
            vectors[i],
            {"doc_id": f"d{i}", "tags": ["even" if i % 2 == 0 else "odd"]},
            rng.normal(size=(3, 4)) if tokens else None,
            document_vector(text, ANALYZER, WEIGHTS),
        )
        for i, text in enumerate(TEXTS)
    ]
    # a page without text: no terms, never a keyword hit
    points.append(
        Point(
            point_id(99),
            vectors[-1],
            {"doc_id": "d99", "tags": ["even"]},
            rng.normal(size=(3, 4)) if tokens else None,
        )
    )
    store.upsert("c", points)
    return vectors


def _ids(hits: list[ScoredPoint]) -> list[str]:
    return [h.payload["doc_id"] for h in hits]


def test_keyword_search_scores_bm25_with_the_stores_idf(store: Store) -> None:
    _fill(store)
    assert store.has_text("c")
    hits = store.search("c", Keywords(query_vector("revenue", ANALYZER)), 5)
    assert _ids(hits) == ["d1", "d4"] or _ids(hits) == ["d4", "d1"]
    # the score is the page's term weight times Qdrant's IDF over the pages with text (5 of 6 points)
    n, df = 5, 2
    idf = math.log((n - df + 0.5) / (df + 0.5) + 1)
    page = document_vector(TEXTS[1], ANALYZER, WEIGHTS)
    weight = dict(zip(page.indices, page.values, strict=True))[query_vector("revenue", ANALYZER).indices[0]]
    got = next(h.score for h in hits if h.payload["doc_id"] == "d1")
    assert got == pytest.approx(weight * idf, rel=1e-4)
    assert _ids(store.search("c", Keywords(query_vector("INV-2024-0042", ANALYZER)), 3)) == ["d0"]
    assert _ids(store.search("c", Keywords(query_vector("東京", ANALYZER)), 3)) == ["d2"]
    assert _ids(store.search("c", Keywords(query_vector("cafe", ANALYZER)), 3)) == ["d3"]
    # no term at all (punctuation, stop words only): nothing, rather than every page
    assert store.search("c", Keywords(query_vector("the of ...", ANALYZER)), 3) == []


def test_fusion_joins_the_two_rankings_and_filters_hold(store: Store) -> None:
    vectors = _fill(store)
    near_photo = vectors[-1] + 0.01
    fused = store.search(
        "c", Fused(Dense(near_photo), Keywords(query_vector("revenue", ANALYZER)), depth=10), 6
    )
    ids = _ids(fused)
    # the page the dense vector finds first, and the keyword hits, are all in the fused top 3
    assert ids[0] in ("d99", "d1", "d4") and {"d99", "d1", "d4"} <= set(ids[:3])
    # the keyword ranking weighted 5 to 1: its pages come first
    ahead = store.search(
        "c", Fused(Dense(near_photo), Keywords(query_vector("revenue", ANALYZER)), depth=10, weight=5.0), 6
    )
    assert set(_ids(ahead)[:2]) == {"d1", "d4"}
    # weight 0: the visual ranking alone decides the order
    alone = store.search(
        "c", Fused(Dense(near_photo), Keywords(query_vector("revenue", ANALYZER)), depth=10, weight=0.0), 6
    )
    assert _ids(alone)[0] == "d99"
    odd = Filter(tags=("odd",))
    for terms in (query_vector("revenue", ANALYZER), query_vector("croissants", ANALYZER)):
        assert set(_ids(store.search("c", Keywords(terms), 6, odd))) <= {"d1", "d3"}
        assert set(_ids(store.search("c", Fused(Dense(near_photo), Keywords(terms)), 6, odd))) <= {"d1", "d3"}


def test_multi_vector_and_hybrid_rankings_fuse_with_keywords(store: Store) -> None:
    vectors = _fill(store, tokens=True)
    rng = np.random.default_rng(5)
    tokens = rng.normal(size=(2, 4))
    terms = query_vector("croissants", ANALYZER)
    for visual in (MaxSim(tokens), Hybrid(vectors[0], tokens, 3)):
        hits = store.search("c", Fused(visual, Keywords(terms), depth=10), 3)
        assert "d3" in _ids(hits) and len(hits) == 3


def test_a_collection_without_text_refuses_terms_and_keyword_search(store: Store) -> None:
    store.ensure_collection("plain", DIM)
    assert not store.has_text("plain")
    terms = document_vector("some words", ANALYZER, WEIGHTS)
    with pytest.raises(StoreError, match="keeps no text"):
        store.upsert("plain", [Point(point_id(1), np.ones(DIM), {}, terms=terms)])
    with pytest.raises(StoreError, match="keeps no text"):
        store.search("plain", Keywords(query_vector("words", ANALYZER)), 3)


def test_bad_terms_and_weights_are_refused_before_anything_is_sent(store: Store) -> None:
    _fill(store)
    with pytest.raises(StoreError, match="repeated indices"):
        Point(point_id(5), np.ones(DIM), {}, terms=SparseVector([3, 3], [1.0, 1.0]))
    with pytest.raises(StoreError, match="unsigned 32-bit"):
        Point(point_id(5), np.ones(DIM), {}, terms=SparseVector([2**32], [1.0]))
    with pytest.raises(StoreError, match="NaN"):
        store.search("c", Keywords(SparseVector([1], [float("nan")])), 3)
    with pytest.raises(StoreError, match="keyword weight"):
        store.search(
            "c", Fused(Dense(np.ones(DIM)), Keywords(query_vector("revenue", ANALYZER)), weight=-1), 3
        )


def test_scrolls_leave_the_text_out_unless_asked(store: Store) -> None:
    store.ensure_collection("c", DIM, text=True)
    text = "a long page text " * 100
    store.upsert(
        "c",
        [
            Point(
                point_id(1),
                np.ones(DIM),
                {"doc_id": "d1", "text": text, "text_from": "pdf"},
                terms=document_vector(text, ANALYZER, WEIGHTS),
            )
        ],
    )
    ((_, payload),) = list(store.scroll("c"))
    assert payload == {"doc_id": "d1", "text_from": "pdf"}
    ((_, payload),) = list(store.scroll("c", with_text=True))
    assert payload["text"] == text
    (point,) = list(store.scroll("c", with_vectors=True))
    assert "text" not in point.payload
    # a search brings it: the snippet is made from it
    (hit,) = store.search("c", Keywords(query_vector("page", ANALYZER)), 1)
    assert hit.payload["text"] == text
