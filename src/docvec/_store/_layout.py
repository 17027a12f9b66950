"""How docvec lays out a collection, the same on both backends: vector names, types, the int8 copies, the
indexed payload fields."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LAYOUT", "Layout"]


@dataclass(frozen=True)
class Layout:
    """How docvec lays out a collection, the same on both backends."""

    #: the dense vector, one per page
    vector: str = "page"
    #: a multi-vector collection's other vector: one 128-d vector per token, scored by late interaction
    #: (MaxSim: the sum over query tokens of their best cosine among the page's tokens). Stored as Qdrant
    #: recommends for ColPali-style data: float16, no HNSW graph (m=0; a graph over token vectors takes
    #: minutes to build and is not used: a search either reranks the pages a dense prefetch found, or scans
    #: every page), memory-mapped from disk (the OS keeps what searches read in its cache), with an int8
    #: copy, memory-mapped too. An exhaustive MaxSim scans the int8 copy and rescores its best
    #: ``token_oversampling * k`` pages with the float16 tokens: 1.4x faster than scanning float16 at 10k
    #: pages, the same top 10 and exact scores (benchmarks/bench_search.py), for 1 byte a token component
    #: on disk. A hybrid search scores its few prefetched pages with the float16 tokens directly: scoring
    #: 100 with int8 and rescoring took longer than that.
    tokens: str = "tokens"
    #: a collection with text's third vector: the page text's terms as a sparse vector (docvec._text._terms:
    #: BM25's term-frequency part, computed by docvec), with Qdrant's IDF modifier, so that the inverse
    #: document frequencies are Qdrant's, counted at query time over the pages that have text: adding
    #: documents never re-weights stored pages. A page without text has no such vector.
    text: str = "text"
    #: the payload field that holds a page's text (bounded by DOCVEC_TEXT_MAX_CHARS): scrolls leave it out
    #: unless asked (Store.scroll), searches bring it for the snippets
    text_field: str = "text"
    #: the reciprocal rank fusion constant of a fused search (visual and keyword rankings): Qdrant's default.
    #: Qdrant's weighted RRF scores a page 1 / (k - 1 + (position + 1) / weight) in each ranking: a weight
    #: divides the positions. With the paper's k = 60 (Cormack et al., 2009) weights barely move a page and a
    #: weight above 1 made the fusion worse; with 2 a larger keyword weight favours the keyword ranking, as a
    #: user means by it, and the fusion at weight 1 scored nDCG@10 0.77-0.87 against 0.46-0.81 at k = 60
    #: (benchmarks/bench_text_quality.py, two stand-ins for the visual ranking)
    rrf_k: int = 2
    #: its distance; scores are cosine similarities in [-1, 1]
    distance: str = "cosine"
    #: how new collections store it: half of float32's memory and disk. The rounding (relative 2**-11 per
    #: component) moves a cosine score by under 1e-3, below the model's own bf16 noise.
    datatype: str = "float16"
    #: New collections also keep an int8 copy of each vector in RAM (scalar quantization, this quantile of
    #: values clipped): a search scans those, a quarter of the float32 bytes, takes the best
    #: ``oversampling * k``, and rescores them with the stored vectors, so the scores returned are exact.
    #: benchmarks/bench_search.py measures the cost in recall@10 against an exact float32 scan: 1.000 at
    #: 10k and 100k points with 2x oversampling, 0.94-0.95 without.
    quantile: float = 0.99
    oversampling: float = 2.0
    #: the exhaustive MaxSim's: its int8 scan put the true top 10 within the best 2 * 10 at 2k and 10k
    #: pages in the benchmark, within the best 10 for 97.5%; rescoring 40 pages costs ~3 ms of ~498
    token_oversampling: float = 4.0
    #: The storage format new collections get, recorded with each version so that a reindex can bring an
    #: older one up to date: 1, float32 vectors and an HNSW graph; 2, float16 with an int8 copy of the page
    #: vector, no graph; 3, multi-vector collections' token vectors get an int8 copy too (single-vector
    #: collections are the same in 2 and 3).
    format: int = 3

    def format_for(self, multivector: bool) -> int:
        """The oldest storage format that is as good as :attr:`format` for this kind of collection."""
        return self.format if multivector else 2

    #: payload fields filters use; both backends create a keyword index on each (collections made before
    #: ``state`` or ``image`` have no index on them: filtering on them still works, by reading payloads)
    indexed_fields: tuple[str, ...] = ("doc_id", "source", "tags", "state", "image")


#: the layout of every collection docvec creates
LAYOUT = Layout()
