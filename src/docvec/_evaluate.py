"""Retrieval quality on a BEIR/ViDoRe-style dataset folder: nDCG@5 and recall@k.

The folder holds ``queries.jsonl`` (``{"_id": ..., "text": ...}`` a line), ``corpus/`` (page images and
PDFs) and ``qrels.tsv`` (query-id, corpus-id, score; an optional header line). A corpus-id is a file's
stem (an image, or page 1 of a PDF) or ``stem#N`` for page N of a PDF. The corpus is ingested into a fresh
temporary data folder, so the user's own index is never touched, and every query goes through
:meth:`docvec.Index.search`, the path the CLI and the API use. With ``rerank`` every mode is scored twice:
as it is, and with the reranker's second stage over its best ``rerank`` pages (``dense`` and
``dense+rerank20``).
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._config import Settings
from ._errors import ConfigError, InputError
from ._index import Index
from ._model._embedder import Embedder
from ._pipeline._sources import discover
from ._records import Hit, ModeChoice, check_k, check_rerank, mode_parts

log = logging.getLogger("docvec")

__all__ = [
    "Dataset",
    "EvalReport",
    "ModeScores",
    "QueryResult",
    "evaluate",
    "load_dataset",
    "ndcg_at",
    "recall_at",
    "reranked_mode",
]

#: nDCG is reported at this cut-off (ViDoRe's headline metric), recall at the caller's k
NDCG_K = 5


def ndcg_at(ranked: Sequence[str], relevance: Mapping[str, float], k: int) -> float:
    """nDCG@k of one ranking: DCG of the top ``k`` over the DCG of the ideal ranking.

    Linear gains (``rel / log2(rank + 1)``), as trec_eval and BEIR compute it; grades come from
    ``relevance`` (corpus-id -> graded score, <= 0 meaning not relevant). 0.0 when nothing is relevant.
    """
    if k < 1:
        raise InputError(f"k must be positive, not {k}")
    dcg = sum(max(relevance.get(doc, 0.0), 0.0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted((r for r in relevance.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], relevance: Mapping[str, float], k: int) -> float:
    """Recall@k of one ranking: the share of the relevant corpus-ids (score > 0) found in the top ``k``."""
    if k < 1:
        raise InputError(f"k must be positive, not {k}")
    relevant = {doc for doc, r in relevance.items() if r > 0}
    if not relevant:
        return 0.0
    return len(relevant & set(ranked[:k])) / len(relevant)


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset: query texts, graded judgements (query-id -> corpus-id -> score), corpus folder."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, float]]
    corpus: Path


def _corpus_id(cid: str) -> str:
    # "stem" and "stem#1" name the same page: normalise to the explicit form so hits compare directly
    return cid if "#" in cid else f"{cid}#1"


def load_dataset(folder: Path) -> Dataset:
    """Read ``queries.jsonl`` and ``qrels.tsv``, find ``corpus/``; :class:`InputError` says what is wrong."""
    folder = Path(folder)
    qfile, rfile, corpus = folder / "queries.jsonl", folder / "qrels.tsv", folder / "corpus"
    for needed in (qfile, rfile, corpus):
        if not needed.exists():
            raise InputError(f"dataset {folder}: {needed.name} is missing")
    queries: dict[str, str] = {}
    for n, line in enumerate(qfile.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            queries[str(row["_id"])] = str(row["text"])
        except (ValueError, KeyError, TypeError):
            raise InputError(f"{qfile} line {n}: expected a JSON object with _id and text") from None
    qrels: dict[str, dict[str, float]] = {}
    for n, line in enumerate(rfile.read_text(encoding="utf-8").splitlines(), start=1):
        cols = line.split("\t") if "\t" in line else line.split()
        if not cols or not line.strip():
            continue
        if len(cols) != 3:
            raise InputError(f"{rfile} line {n}: expected query-id, corpus-id and score")
        try:
            score = float(cols[2])
        except ValueError:
            if n == 1:
                continue  # the BEIR header "query-id corpus-id score"
            raise InputError(f"{rfile} line {n}: score {cols[2]!r} is not a number") from None
        qrels.setdefault(cols[0].strip(), {})[_corpus_id(cols[1].strip())] = score
    unknown = sorted(set(qrels) - set(queries))
    if unknown:
        raise InputError(f"{rfile}: query ids not in queries.jsonl: {', '.join(unknown[:5])}")
    return Dataset(queries=queries, qrels=qrels, corpus=corpus)


@dataclass(frozen=True)
class QueryResult:
    """One query's ranking (corpus-ids, best first) and its metrics."""

    query_id: str
    ranked: list[str]
    ndcg_at_5: float
    recall: float


def reranked_mode(mode: str, rerank: int) -> str:
    """The name a mode's scores with the second stage go by in a report: ``dense+rerank20``."""
    return f"{mode}+rerank{rerank}"


@dataclass(frozen=True)
class ModeScores:
    """One search mode's mean nDCG@5 and recall@k over the judged queries."""

    ndcg_at_5: float
    recall_at_k: float


@dataclass
class EvalReport:
    """Mean nDCG@5 and recall@k over the judged queries (of the first mode asked for, and of each in
    ``modes``), with what was indexed and what failed. With ``rerank``, ``modes`` holds each mode twice:
    as it is, and reranked (:func:`reranked_mode`: ``dense+rerank20``)."""

    k: int
    queries: int
    ndcg_at_5: float
    recall_at_k: float
    pages_indexed: int
    documents_failed: int
    queries_unjudged: int
    #: corpus-ids judged relevant that name no page of the corpus (a missing file, a page past its end)
    unknown_judged: list[str] = field(default_factory=list)
    per_query: list[QueryResult] = field(default_factory=list)
    #: every mode asked for, as it ran (``auto`` resolved), each followed by its reranked run with ``rerank``
    modes: dict[str, ModeScores] = field(default_factory=dict)
    #: the pages the reranker read per query (the first stage's best), 0: no second stage
    rerank: int = 0

    def to_dict(self, *, per_query: bool = False) -> dict[str, Any]:
        """A JSON-able dict; the per-query rankings only when asked."""
        out: dict[str, Any] = {
            "k": self.k,
            "queries": self.queries,
            "ndcg@5": self.ndcg_at_5,
            f"recall@{self.k}": self.recall_at_k,
            "pages_indexed": self.pages_indexed,
            "documents_failed": self.documents_failed,
            "queries_unjudged": self.queries_unjudged,
            "unknown_judged": len(self.unknown_judged),
            "rerank": self.rerank,
            "modes": {
                m: {"ndcg@5": v.ndcg_at_5, f"recall@{self.k}": v.recall_at_k} for m, v in self.modes.items()
            },
        }
        if per_query:
            out["per_query"] = [r.__dict__ for r in self.per_query]
        return out


def _hit_id(hit: Hit) -> str:
    return f"{Path(hit.source).stem}#{hit.page}"


def evaluate(
    folder: Path,
    settings: Settings,
    *,
    k: int = 10,
    embedder: Embedder | None = None,
    modes: Sequence[ModeChoice] = ("auto",),
    rerank: int = 0,
) -> EvalReport:
    """Index ``folder``'s corpus into a temporary store, run every judged query in each search mode of
    ``modes``, return the metrics (a multi-vector collection when a mode needs one: the same pages serve
    every mode).

    ``rerank`` (``k`` to 100; 0: none) runs every mode a second time with the reranker
    (``settings.rerank_model``) over its best ``rerank`` pages: its scores go under
    ``reranked_mode(mode, rerank)`` beside the mode's own. The first runs never rerank, whatever
    ``settings.rerank`` says.

    Queries without a relevant judgement (score > 0) are not scored (as BEIR does) and are counted in
    ``queries_unjudged``; judged corpus-ids that name no page of the corpus are listed in
    ``unknown_judged`` (and logged). Two corpus files with the same stem would make corpus-ids ambiguous and
    are refused. ``embedder`` lets a caller reuse an open model; otherwise ``settings.model`` is opened.
    """
    check_k(k)
    check_rerank(rerank, k)
    if rerank and not settings.rerank_model:
        raise ConfigError(
            "scoring with the second stage needs a reranker: set DOCVEC_RERANK_MODEL (or `docvec eval "
            "--rerank-model`), e.g. qwen3-vl-reranker-2b after `docvec models pull qwen3-vl-reranker-2b`"
        )
    data = load_dataset(folder)
    files = discover([data.corpus]).files
    stems: dict[str, Path] = {}
    for f in files:
        if f.stem in stems:
            raise InputError(f"corpus files {stems[f.stem].name} and {f.name} have the same stem")
        stems[f.stem] = f
    judged = {q: rel for q, rel in data.qrels.items() if any(r > 0 for r in rel.values())}
    with tempfile.TemporaryDirectory(prefix="docvec-eval-") as tmp:
        # a fresh embedded store: never the user's index, never a server from DOCVEC_QDRANT_URL
        update: dict[str, Any] = {
            "data_dir": Path(tmp),
            "qdrant_url": None,
            "qdrant_api_key": None,
            "collection": "eval",
        }
        if any(m != "auto" and mode_parts(m).tokens for m in modes):
            update["multivector"] = True
        s = settings.model_copy(update=update)
        with Index.open(s, embedder=embedder) as index:
            if rerank:
                index.reranker()  # a reranker that cannot load fails before the corpus is indexed
            report = index.add([data.corpus])
            pages = {
                Path(d.source).stem: d.page_count for d in index.documents(limit=len(files) or 1).documents
            }
            by_mode: dict[str, list[QueryResult]] = {}
            for asked in modes:
                mode = index.search_mode(asked)
                runs = [(mode, 0)] + ([(reranked_mode(mode, rerank), rerank)] if rerank else [])
                for name, depth in runs:
                    if name in by_mode:  # asked twice (auto and what it resolves to): scored once
                        continue
                    results = by_mode[name] = []
                    for qid in sorted(judged):
                        hits = index.search(data.queries[qid], k, mode=mode, rerank=depth)
                        ranked = [_hit_id(h) for h in hits]
                        results.append(
                            QueryResult(
                                query_id=qid,
                                ranked=ranked,
                                ndcg_at_5=ndcg_at(ranked, judged[qid], NDCG_K),
                                recall=recall_at(ranked, judged[qid], k),
                            )
                        )
    scores = {
        mode: ModeScores(
            ndcg_at_5=sum(r.ndcg_at_5 for r in rs) / len(rs) if rs else 0.0,
            recall_at_k=sum(r.recall for r in rs) / len(rs) if rs else 0.0,
        )
        for mode, rs in by_mode.items()
    }
    results = next(iter(by_mode.values()))
    first = next(iter(scores.values()))
    n = len(results)
    known = {f"{stem}#{page}" for stem, count in pages.items() for page in range(1, count + 1)}
    unknown = sorted({cid for rel in judged.values() for cid, r in rel.items() if r > 0} - known)
    if unknown:
        log.warning(
            "qrels name %d corpus ids that are not in the corpus: %s", len(unknown), ", ".join(unknown[:5])
        )
    return EvalReport(
        k=k,
        queries=n,
        ndcg_at_5=first.ndcg_at_5,
        recall_at_k=first.recall_at_k,
        pages_indexed=report.pages_indexed,
        documents_failed=report.documents_failed,
        queries_unjudged=len(data.queries) - n,
        unknown_judged=unknown,
        per_query=results,
        modes=scores,
        rerank=rerank,
    )
