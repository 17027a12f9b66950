"""Keyword search quality on real page texts: docvec's ``text`` mode beside bm25s, and the fused mode.

    python benchmarks/bench_text_quality.py [--corpus DIR] [--per-page 2] [--seed 0]

The set is built BEIR-style from the text layers (pypdfium2) of real PDFs: the corpus named by --corpus, by
``DOCVEC_TEST_CORPUS`` or found at ``../shared/corpus`` beside the repository (with its MANIFEST.tsv), else
the repository's own documents (``tests/data/documents`` and ``src/docvec/samples``: a smaller set); the
output says which it used. Every page with at least ``MIN_WORDS`` words is a document (files with the same
bytes count once).

Queries, drawn with a fixed seed, from words found by a neutral rule (lowercase runs of letters, no stemming,
so that no system's analyzer picked them; words broken at a line's end, with pdfium's hyphenation mark or a
soft hyphen, made whole, as a user types them):

- known-item queries, ``--per-page`` for each page, relevant: that page alone. In turn, of four kinds: *rare*
  (2-3 of the page's 8 rarest informative words in the whole set, in the page's order), *phrase* (3-4
  consecutive words of the page, as printed, holding at least 2 informative words), *mixed* (one rare word
  and one or two of the page's most frequent informative words), *code* (a number or code of 4 or more
  characters, or else a capitalised name, on the page, with one of its most frequent informative words; a
  page with neither gets a *rare* query);
- topic queries: for each document of 3 or more pages, pairs of informative words frequent on one of its
  pages; relevant: every page of that document that holds both words (pairs found on 2 to 15 pages).

Their bias, plainly: every query is made of words printed on the relevant pages, and the topic qrels are
defined by those words' presence, so they favour exact lexical matching (BM25 of any flavour) over any
semantic ranking; a stemmer that also matches other forms of a word can find pages the topic qrels do not
count. A known-item qrel holds one page, so a near-duplicate page (the same letterhead on every page of a
document) counts as a miss. Real users type vaguer queries. The set is small and mostly one German book
(analysed, like every text here, with docvec's default English analyzer).

Systems, all top 10:

- (a) docvec ``text`` mode: the embedded store (qdrant-edge), pages' sparse vectors from
  ``docvec._text._terms.document_vector`` (Analyzer, TermWeights: k1 1.2, b 0.75, fixed avg_len), the IDF
  Qdrant's (its IDF modifier), queries from ``query_vector``;
- (b) bm25s on the same texts, given the same terms as (a) (docvec's Analyzer), method "lucene" (its IDF
  ln(1 + (N - n + 0.5) / (n + 0.5)) is Qdrant's), the same k1 and b; its avg_len is the set's mean;
- (c) bm25s as its README has a user do it: ``bm25s.tokenize(texts, stopwords="en",
  stemmer=Stemmer.Stemmer("english"))``;
- numpy re-scorings of (a)'s formula with avg_len = TermWeights' and = the set's mean: a diagnosis of any
  gap between (a) and (b);
- (d) the fused mode (dense + text, RRF, depth 100, keyword weight 1, docvec's default, and --weights)
  through the same store. There are no trained
  visual weights here, so the dense ranking is a stand-in, reported alone too: *noise* (random unit vectors,
  what a random-weight model's page embeddings are to a query) and *tf-idf* (a weak but informative one: a
  128-d Gaussian random projection of each page's TF-IDF vector over the neutral words, the query's the
  same way).

nDCG@10 and recall@10 per system, overall and by query kind; (a) - (b) must be within 0.01.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parent.parent
#: the repository's own documents: the tests' real-world files and the shipped samples
OWN_FOLDERS = (REPO / "tests" / "data" / "documents", REPO / "src" / "docvec" / "samples")
MIN_WORDS = 50
K = 10
#: the gap between docvec's text mode and bm25s on the same terms that the issue allows
TOLERANCE = 0.01
DENSE_DIM = 128

_WORD = re.compile(r"[^\W\d_]+")  # the neutral rule: runs of letters
_CODE = re.compile(r"\b(?=[\w./-]*\d)[\w][\w./-]*\w\b")  # a run holding a digit: a number or a code
_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]{3,}\b")  # a capitalised word after a lowercase word: a name
#: words too common to make a query of (English and German function words): only the query builder's rule
_FUNCTION_WORDS_TEXT = (
    "about also been between both can could does each from have here however into its more most much must "
    "only other over same should since some such than that their them then there these they this those "
    "through under upon very were what when where which while will with within would your page pages "
    "aber alle also auch aus bei beim bis das dass dem den der des die dies diese dieser dieses durch ein "
    "eine einem einen einer eines für hat ist mit nach nicht noch nur oder sich sie sind über und von vor "
    "wie wird wir zum zur"
)
_FUNCTION_WORDS = frozenset(_FUNCTION_WORDS_TEXT.split())


@dataclass(frozen=True)
class Page:
    doc: str
    number: int
    text: str


@dataclass
class Query:
    qid: str
    text: str
    kind: str
    relevant: dict[int, int] = field(default_factory=dict)


def default_corpus() -> Path | None:
    """The real-world corpus: ``DOCVEC_TEST_CORPUS``, else ``../shared/corpus`` beside the repository, if
    it has a MANIFEST.tsv."""
    named = os.environ.get("DOCVEC_TEST_CORPUS")
    for folder in ([Path(named)] if named else []) + [REPO.parent / "shared" / "corpus"]:
        if (folder / "MANIFEST.tsv").is_file():
            return folder
    return None


#: pdfium's hyphenation marks and the soft hyphen: inside a word broken at a line's end
_JOINERS = str.maketrans("", "", "\ufffe\x02\u00ad")


def _whole(text: str) -> str:
    """``text`` with words broken at a line's end made whole again, as a user types them."""
    return text.translate(_JOINERS)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(_whole(text))]


def read_pages(folders: Iterable[Path], min_words: int = MIN_WORDS) -> list[Page]:
    """The text layer of every page of the PDFs in ``folders`` with at least ``min_words`` words; files
    with the same bytes count once, files PDFium cannot open are skipped."""
    import pypdfium2 as pdfium

    seen: set[str] = set()
    pages: list[Page] = []
    for folder in folders:
        for path in sorted(Path(folder).glob("*.pdf")):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            try:
                doc = pdfium.PdfDocument(str(path))
            except pdfium.PdfiumError:
                continue
            try:
                for i in range(len(doc)):
                    try:
                        page = doc[i]
                        textpage = page.get_textpage()
                        text = textpage.get_text_range()
                        textpage.close()
                        page.close()
                    except pdfium.PdfiumError:
                        continue
                    if len(_words(text)) >= min_words:
                        pages.append(Page(path.name, i + 1, text))
            finally:
                doc.close()
    return pages


def _informative(word: str) -> bool:
    from docvec._text._terms import ENGLISH_STOP_WORDS

    return len(word) >= 4 and word not in _FUNCTION_WORDS and word not in ENGLISH_STOP_WORDS


def build_queries(pages: Sequence[Page], per_page: int, seed: int) -> list[Query]:
    """Known-item queries (``per_page`` a page) and topic queries, as the module's docstring tells."""
    rng = np.random.default_rng(seed)
    words = [_words(p.text) for p in pages]
    df: Counter[str] = Counter()
    for ws in words:
        df.update(set(ws))
    kinds = ("rare", "phrase", "mixed", "code")
    queries: list[Query] = []
    turn = 0
    for i, page in enumerate(pages):
        info = [w for w in dict.fromkeys(words[i]) if _informative(w)]
        if len(info) < 3:
            continue
        tf = Counter(w for w in words[i] if _informative(w))
        rarest = sorted(info, key=lambda w: (df[w], -tf[w], w))[:8]
        common = sorted(info, key=lambda w: (-tf[w], w))[:6]
        order = {w: n for n, w in enumerate(info)}
        for _ in range(per_page):
            kind = kinds[turn % len(kinds)]
            turn += 1
            text = None
            if kind == "code":
                whole = _whole(page.text)
                codes = [c for c in dict.fromkeys(_CODE.findall(whole)) if len(c) >= 4 and c.isascii()]
                names = list(dict.fromkeys(_NAME.findall(whole)))
                found = codes if codes and (not names or rng.random() < 0.5) else names
                if found:
                    text = f"{found[rng.integers(len(found))]} {common[rng.integers(len(common))]}"
                else:
                    kind = "rare"
            if kind == "phrase":
                raw = _whole(page.text).split()
                starts = [
                    s
                    for s in range(max(len(raw) - 4, 0))
                    if sum(_informative(w) for w in _words(" ".join(raw[s : s + 4]))) >= 2
                ]
                if starts:
                    s, n = int(rng.choice(starts)), int(rng.integers(3, 5))
                    text = " ".join(raw[s : s + n])
                else:
                    kind = "rare"
            if kind == "mixed":
                rare = rarest[rng.integers(min(3, len(rarest)))]
                others = [w for w in common if w != rare]
                chosen = [
                    rare,
                    *rng.choice(others, size=min(int(rng.integers(1, 3)), len(others)), replace=False),
                ]
                text = " ".join(sorted(chosen, key=order.__getitem__))
            if kind == "rare":
                n = min(int(rng.integers(2, 4)), len(rarest))
                chosen = list(rng.choice(rarest, size=n, replace=False))
                text = " ".join(sorted(chosen, key=order.__getitem__))
            assert text is not None
            queries.append(Query(f"k{len(queries)}", text, kind, {i: 1}))
    queries += _topic_queries(pages, words, df, rng)
    return queries


def _topic_queries(
    pages: Sequence[Page], words: list[list[str]], df: Counter[str], rng: np.random.Generator
) -> list[Query]:
    by_doc: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pages):
        by_doc[p.doc].append(i)
    sets = [set(ws) for ws in words]
    out: list[Query] = []
    for _doc, members in sorted(by_doc.items()):
        if len(members) < 3:
            continue
        wanted = min(3 + len(members) // 8, 20)
        found: dict[tuple[str, str], list[int]] = {}
        for seed_page in rng.permutation(members):
            tf = Counter(w for w in words[seed_page] if _informative(w))
            top = [w for w, n in tf.most_common(8) if n >= 2]
            for a in range(len(top)):
                for b in range(a + 1, len(top)):
                    pair = (top[a], top[b])
                    hits = [m for m in members if pair[0] in sets[m] and pair[1] in sets[m]]
                    if 2 <= len(hits) <= 15 and pair not in found:
                        found[pair] = hits
                        break
                else:
                    continue
                break
            if len(found) >= wanted:
                break
        for pair, hits in found.items():
            out.append(Query(f"t{len(out)}", " ".join(pair), "topic", dict.fromkeys(hits, 1)))
    return out


# -- metrics ----------------------------------------------------------------------------------------


def ndcg_at(ranked: Sequence[int], relevant: dict[int, int], k: int = K) -> float:
    """nDCG@k with graded relevance (2^rel - 1 gain, log2 discount), the ideal from the qrels."""
    dcg = sum((2 ** relevant.get(d, 0) - 1) / math.log2(r + 2) for r, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[int], relevant: dict[int, int], k: int = K) -> float:
    rel = {d for d, g in relevant.items() if g > 0}
    return len(rel & set(ranked[:k])) / len(rel) if rel else 0.0


# -- systems ----------------------------------------------------------------------------------------

Rankings = list[list[int]]


def store_rankings(
    pages: Sequence[Page],
    queries: Sequence[Query],
    dense: dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]],
    *,
    keyword_weights: Sequence[float] = (1.0,),
    k: int = K,
) -> dict[str, Rankings]:
    """(a) and (d): docvec's text mode through the embedded store, and for each dense stand-in (name: page
    vectors, query vectors) the dense search alone and the fused search with each keyword weight of
    ``keyword_weights``; one collection per stand-in."""
    from docvec._store import Dense, Fused, Keywords, Point, ScoredPoint, open_store, point_id
    from docvec._text._terms import Analyzer, TermWeights, document_vector, query_vector

    analyzer, weights = Analyzer(), TermWeights()
    terms = [document_vector(p.text, analyzer, weights) for p in pages]
    qterms = [query_vector(q.text, analyzer) for q in queries]
    out: dict[str, Rankings] = {}
    root = Path(tempfile.mkdtemp(prefix="docvec-text-quality-"))
    try:
        with open_store(path=root) as store:
            for name, (pvec, qvec) in dense.items():
                coll = f"q-{name}"
                store.ensure_collection(coll, pvec.shape[1], text=True)
                ids = {point_id(coll, i): i for i in range(len(pages))}
                store.upsert(
                    coll,
                    [
                        Point(point_id(coll, i), pvec[i], {"text": p.text, "doc_id": p.doc}, terms=terms[i])
                        for i, p in enumerate(pages)
                    ],
                )
                store.optimize(coll)

                def ranked(hits: Sequence[ScoredPoint], ids: dict[str, int] = ids) -> list[int]:
                    return [ids[h.id] for h in hits]

                if "text" not in out:
                    out["text"] = [ranked(store.search(coll, Keywords(qv), k)) for qv in qterms]
                out[f"dense:{name}"] = [ranked(store.search(coll, Dense(qv), k)) for qv in qvec]
                for w in keyword_weights:
                    out[f"fused:{name}@{w:g}"] = [
                        ranked(
                            store.search(
                                coll, Fused(Dense(qvec[j]), Keywords(qterms[j]), depth=100, weight=w), k
                            )
                        )
                        for j in range(len(queries))
                    ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def bm25s_rankings(
    corpus_tokens: list[list[str]], query_tokens: list[list[str]], *, k1: float, b: float, k: int = K
) -> Rankings:
    """bm25s, method "lucene" (Lucene's IDF, Qdrant's too), on the given tokens; top ``k`` of each query."""
    import bm25s

    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index(corpus_tokens, show_progress=False)
    out: Rankings = []
    for q in query_tokens:
        if not any(t in retriever.vocab_dict for t in q):
            out.append([])  # no known term: nothing matches (bm25s would rank every page at 0)
            continue
        docs, scores = retriever.retrieve([q], k=min(k, len(corpus_tokens)), show_progress=False)
        out.append([int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0])
    return out


def bm25s_default_rankings(pages: Sequence[Page], queries: Sequence[Query], *, k: int = K) -> Rankings:
    """(c): bm25s as its README has a user do it: its tokenizer, English stop words, PyStemmer's English."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    corpus = bm25s.tokenize([p.text for p in pages], stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    out: Rankings = []
    for q in queries:
        tokens = bm25s.tokenize(
            [q.text], stopwords="en", stemmer=stemmer, show_progress=False, return_ids=False
        )
        known = [t for t in tokens[0] if t in retriever.vocab_dict]
        if not known:
            out.append([])
            continue
        docs, scores = retriever.retrieve([known], k=min(k, len(pages)), show_progress=False)
        out.append([int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0])
    return out


def formula_rankings(
    corpus_tokens: list[list[str]],
    query_tokens: list[list[str]],
    *,
    k1: float,
    b: float,
    avg_len: float,
    k: int = K,
) -> Rankings:
    """docvec's formula in numpy: sum over the query's terms (repeats count) of Lucene's IDF times
    tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len)); ties broken by page order."""
    n = len(corpus_tokens)
    df: Counter[str] = Counter()
    counts = [Counter(ts) for ts in corpus_tokens]
    for c in counts:
        df.update(c.keys())
    lengths = np.array([len(ts) for ts in corpus_tokens], dtype=np.float64)
    norm = k1 * (1 - b + b * lengths / avg_len)
    out: Rankings = []
    for q in query_tokens:
        scores = np.zeros(n)
        for term, times in Counter(q).items():
            if term not in df:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            tf = np.array([c.get(term, 0) for c in counts], dtype=np.float64)
            scores += times * idf * tf * (k1 + 1) / (tf + norm)
        order = np.argsort(-scores, kind="stable")[:k]
        out.append([int(d) for d in order if scores[d] > 0])
    return out


def dense_standins(
    pages: Sequence[Page], queries: Sequence[Query], seed: int
) -> dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]]:
    """The dense rankings' stand-ins (the module's docstring): ``noise`` and ``tfidf``."""
    rng = np.random.default_rng(seed + 1)

    def unit(v: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        norms = np.linalg.norm(v, axis=1, keepdims=True)
        return (v / np.where(norms > 0, norms, 1)).astype(np.float32)

    noise = (
        unit(rng.standard_normal((len(pages), DENSE_DIM)).astype(np.float32)),
        unit(rng.standard_normal((len(queries), DENSE_DIM)).astype(np.float32)),
    )
    page_words = [Counter(_words(p.text)) for p in pages]
    df: Counter[str] = Counter()
    for c in page_words:
        df.update(c.keys())
    vocab = {w: i for i, w in enumerate(sorted(df))}
    idf = np.array([math.log(len(pages) / df[w]) + 1 for w in sorted(df)], dtype=np.float32)
    projection = rng.standard_normal((len(vocab), DENSE_DIM)).astype(np.float32)

    def embed(counts: Counter[str]) -> npt.NDArray[np.float32]:
        ids = np.array([vocab[w] for w in counts if w in vocab], dtype=np.int64)
        if not len(ids):
            return rng.standard_normal(DENSE_DIM).astype(np.float32)  # nothing known: no information
        tf = np.array([1 + math.log(counts[w]) for w in counts if w in vocab], dtype=np.float32)
        w = tf * idf[ids]
        return (w / np.linalg.norm(w)) @ projection[ids]

    tfidf = (
        unit(np.stack([embed(c) for c in page_words])),
        unit(np.stack([embed(Counter(_words(q.text))) for q in queries])),
    )
    return {"noise": noise, "tfidf": tfidf}


# -- the run ----------------------------------------------------------------------------------------


@dataclass
class Result:
    pages: int
    documents: int
    queries: list[Query]
    rankings: dict[str, Rankings]
    mean_terms: float
    avg_len: float
    collisions: int
    seconds: float

    def score(self, system: str, kind: str | None = None) -> tuple[float, float]:
        """(mean nDCG@10, mean recall@10) of ``system`` over the queries (of ``kind``)."""
        pairs = [
            (ndcg_at(r, q.relevant), recall_at(r, q.relevant))
            for q, r in zip(self.queries, self.rankings[system], strict=True)
            if kind is None or q.kind == kind
        ]
        if not pairs:
            return float("nan"), float("nan")
        a = np.asarray(pairs)
        return float(a[:, 0].mean()), float(a[:, 1].mean())

    @property
    def gap(self) -> float:
        """nDCG@10 of (a) minus (b)."""
        return self.score("text")[0] - self.score("bm25s")[0]


def evaluate(
    pages: Sequence[Page],
    queries: Sequence[Query],
    *,
    seed: int = 0,
    keyword_weights: Sequence[float] = (1.0,),
) -> Result:
    """Every system's top 10 for every query (the module's docstring), and what a diagnosis needs."""
    from docvec._text._terms import Analyzer, TermWeights, term_id

    t0 = time.perf_counter()
    analyzer, weights = Analyzer(), TermWeights()
    corpus_tokens = [analyzer.terms(p.text) for p in pages]
    query_tokens = [analyzer.terms(q.text) for q in queries]
    mean_terms = float(np.mean([len(t) for t in corpus_tokens]))
    vocab = {t for ts in corpus_tokens for t in ts} | {t for ts in query_tokens for t in ts}
    collisions = len(vocab) - len({term_id(t) for t in vocab})
    rankings = store_rankings(
        pages, queries, dense_standins(pages, queries, seed), keyword_weights=keyword_weights
    )
    rankings["bm25s"] = bm25s_rankings(corpus_tokens, query_tokens, k1=weights.k1, b=weights.b)
    rankings["bm25s-own"] = bm25s_default_rankings(pages, queries)
    for name, avg in (("formula-fixed", weights.avg_len), ("formula-mean", mean_terms)):
        rankings[name] = formula_rankings(
            corpus_tokens, query_tokens, k1=weights.k1, b=weights.b, avg_len=avg
        )
    return Result(
        pages=len(pages),
        documents=len({p.doc for p in pages}),
        queries=list(queries),
        rankings=rankings,
        mean_terms=mean_terms,
        avg_len=weights.avg_len,
        collisions=collisions,
        seconds=time.perf_counter() - t0,
    )


def rows(result: Result) -> list[tuple[str, str]]:
    """(ranking's key, label) of the table's rows, in order."""
    out = [
        ("text", "(a) docvec text mode (qdrant-edge, Analyzer, TermWeights)"),
        ("bm25s", "(b) bm25s, docvec's terms, lucene, same k1/b"),
        ("bm25s-own", "(c) bm25s, its tokenizer + en stop words + stemmer"),
        ("formula-fixed", "    numpy, (a)'s formula, avg_len = TermWeights'"),
        ("formula-mean", "    numpy, (a)'s formula, avg_len = the set's mean"),
    ]
    for name, what in (("noise", "noise (random vectors)"), ("tfidf", "tf-idf random projection")):
        out.append((f"dense:{name}", f"(d) dense stand-in alone: {what}"))
        for key in sorted(k for k in result.rankings if k.startswith(f"fused:{name}@")):
            out.append((key, f"    fused: text + {name}, keyword weight {key.split('@')[1]}"))
    return out


def report(result: Result, what: str, write: Callable[[str], None] = print) -> None:
    kinds = sorted({q.kind for q in result.queries})
    count = Counter(q.kind for q in result.queries)
    write(
        f"set: {what}: {result.pages} pages with >= {MIN_WORDS} words from {result.documents} documents; "
        f"{len(result.queries)} queries ({', '.join(f'{count[k]} {k}' for k in kinds)})"
    )
    head = f"{'system':<58} {'nDCG@10':>8} {'R@10':>6}  " + " ".join(f"{k:>7}" for k in kinds)
    write(head + "   (by kind: nDCG@10)")
    for key, label in rows(result):
        ndcg, rec = result.score(key)
        by_kind = " ".join(f"{result.score(key, k)[0]:>7.3f}" for k in kinds)
        write(f"{label:<58} {ndcg:>8.3f} {rec:>6.3f}  {by_kind}")
    gap = result.gap
    same = sum(a == b for a, b in zip(result.rankings["text"], result.rankings["bm25s"], strict=True))
    write(
        f"(a) - (b) nDCG@10: {gap:+.4f} ({'within' if abs(gap) <= TOLERANCE else 'NOT within'} {TOLERANCE}); "
        f"identical top 10 for {same} of {len(result.queries)} queries"
    )
    fixed = sum(
        a == b for a, b in zip(result.rankings["text"], result.rankings["formula-fixed"], strict=True)
    )
    write(
        f"diagnosis: terms a page {result.mean_terms:.1f} (bm25s's avg_len) vs TermWeights.avg_len "
        f"{result.avg_len:g}; (a) = numpy with the fixed avg_len for {fixed} of {len(result.queries)} "
        "queries; "
        f"{result.collisions} term-id collisions in the set's vocabulary; {result.seconds:.1f} s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, help="a folder of PDFs with a MANIFEST.tsv (default: see above)")
    ap.add_argument("--per-page", type=int, default=2, help="known-item queries per page")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=0, help="print this many queries of each kind")
    ap.add_argument("--weights", default="1,3", help="fused searches' keyword weights, comma-separated")
    args = ap.parse_args(argv)
    corpus = args.corpus or default_corpus()
    if corpus is not None:
        folders: tuple[Path, ...] = (corpus, *OWN_FOLDERS)
        what = f"the corpus {corpus} (with the repository's own documents)"
    else:
        folders = OWN_FOLDERS
        what = "the repository's own documents (tests/data/documents, src/docvec/samples; no corpus found)"
    pages = read_pages(folders)
    queries = build_queries(pages, args.per_page, args.seed)
    for kind in sorted({q.kind for q in queries}):
        for q in [q for q in queries if q.kind == kind][: args.show]:
            print(f"  {kind:<7} {q.text!r} -> {len(q.relevant)} page(s)")
    weights = [float(w) for w in args.weights.split(",") if w]
    result = evaluate(pages, queries, seed=args.seed, keyword_weights=weights)
    report(result, what)
    return 0 if abs(result.gap) <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
