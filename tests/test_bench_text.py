"""benchmarks/bench_text_quality.py runs end to end on the repository's own documents, and docvec's keyword
search (the embedded store) scores within 0.01 nDCG@10 of bm25s given the same terms."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_text_quality.py"


def _load() -> ModuleType:
    """The script as a module (benchmarks/ is no package)."""
    if "bench_text_quality" in sys.modules:
        return sys.modules["bench_text_quality"]
    spec = importlib.util.spec_from_file_location("bench_text_quality", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def quality() -> ModuleType:
    # bm25s is in the dev extra that `make setup` installs: without it this is a set-up error, not a skip
    import bm25s  # noqa: F401

    return _load()


def test_text_mode_matches_bm25s_on_own_documents(quality: ModuleType) -> None:
    t = time.perf_counter()
    pages = quality.read_pages(quality.OWN_FOLDERS)
    queries = quality.build_queries(pages, per_page=2, seed=0)
    result = quality.evaluate(pages, queries, keyword_weights=(1.0,))
    assert time.perf_counter() - t < 60
    assert result.pages >= 10 and len(queries) >= 20
    assert {q.kind for q in queries} >= {"rare", "phrase", "mixed", "topic"}
    for q in queries:
        assert q.relevant and all(0 <= i < len(pages) for i in q.relevant)
    text, bm25s = result.score("text")[0], result.score("bm25s")[0]
    assert abs(text - bm25s) <= quality.TOLERANCE, (text, bm25s)
    assert text > 0.5  # keyword queries made of the pages' own words: a broken store would score near 0
    # (a) is the formula it says it is: the same top 10 as the numpy re-scoring for nearly every query
    same = sum(a == b for a, b in zip(result.rankings["text"], result.rankings["formula-fixed"], strict=True))
    assert same >= 0.9 * len(queries)
    assert set(result.rankings) >= {
        "bm25s-own",
        "dense:noise",
        "fused:noise@1",
        "dense:tfidf",
        "fused:tfidf@1",
    }


def test_script_prints_its_table(quality: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    folder = quality.OWN_FOLDERS[0]
    assert quality.main(["--corpus", str(folder), "--weights", "1"]) == 0
    out = capsys.readouterr().out
    assert f"the corpus {folder}" in out
    assert "(a) - (b) nDCG@10" in out and "within 0.01" in out
    assert "fused: text + tfidf, keyword weight 1" in out


def test_ndcg() -> None:
    module = _load()
    assert module.ndcg_at([3, 1], {1: 1}) == pytest.approx(1 / 1.5849625)
    assert module.ndcg_at([1, 3], {1: 1, 3: 1}) == pytest.approx(1.0)
    assert module.ndcg_at([], {1: 1}) == 0.0
    assert module.recall_at([5, 1], {1: 1, 2: 1}) == 0.5
