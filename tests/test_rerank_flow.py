"""The batch-query flow with a second stage, once through the engine (an ephemeral Prefect server, as on a
laptop), and its script's check of ``--rerank`` before any flow runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docvec import Index, Settings

from .helpers import load_flow

ROOT = Path(__file__).resolve().parents[1]
SMALL = 28 * 28 * 64


def test_query_flow_reranks_each_query(
    prefect_harness: None,
    tmp_path: Path,
    documents: Path,
    tiny_dir: Path,
    reranker_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in (
        "pysamples__minimal-document.pdf",
        "pysamples__pdflatex-4-pages.pdf",
        "pysamples__smile.png",
    ):
        shutil.copy(documents / name, docs / name)
    monkeypatch.setenv("DOCVEC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCVEC_MODEL", str(tiny_dir))
    monkeypatch.setenv("DOCVEC_EMBED__MAX_PIXELS", str(SMALL))
    monkeypatch.setenv("DOCVEC_EMBED__THREADS", "2")
    monkeypatch.setenv("DOCVEC_RERANK_MODEL", str(reranker_dir))
    with Index.open(Settings()) as index:
        assert index.add([docs]).ok and index.count() == 6
    module = load_flow("query")
    flow = module.query_flow  # type: ignore[attr-defined]
    queries, out = tmp_path / "queries.txt", tmp_path / "hits.jsonl"
    queries.write_text('total amount due\n{"query": "a smiling face", "k": 2}\n')

    assert flow(str(queries), str(out), k=3, rerank=6) == 2
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["query"], r["k"], r["rerank"], len(r["hits"])) for r in rows] == [
        ("total amount due", 3, 6, 3),
        ("a smiling face", 2, 6, 2),
    ]
    for row in rows:
        scores = [h["rerank_score"] for h in row["hits"]]
        assert all(0 <= s <= 1 for s in scores) and scores == sorted(scores, reverse=True), scores
    # the same searches as the library answers them
    with Index.open(Settings()) as index:
        for row in rows:
            hits = index.search(row["query"], row["k"], rerank=6)
            assert [h.model_dump(mode="json") for h in hits] == row["hits"]

    # without rerank (DOCVEC_RERANK unset: 0): the first stage's hits, and the lines say so
    assert flow(str(queries), str(out), k=3) == 2
    plain = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["rerank"] == 0 and all(h["rerank_score"] is None for h in r["hits"]) for r in plain)

    # a query whose k is over the depth fails the run before the model loads, and writes nothing
    out.unlink()
    state = flow(str(queries), str(out), k=3, rerank=2, return_state=True)
    assert state.is_failed() and not out.exists()
    with pytest.raises(Exception, match=r"line 1: rerank \(2\) is below k \(3\)"):
        state.result()


def test_the_script_checks_rerank_before_the_flow_runs(tmp_path: Path) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_text('total amount due\n{"query": "a smiling face", "k": 4}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCVEC_")}
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "flows" / "query.py"),
            str(queries),
            str(tmp_path / "out"),
            "-k",
            "3",
            "--rerank",
            "3",
        ],
        capture_output=True,
        text=True,
        env={**env, "DOCVEC_DATA_DIR": str(tmp_path / "data")},
        timeout=300,
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.strip() == (
        f"error: {queries}: line 2: rerank (3) is below k (4): the reranker orders the best rerank pages and "
        "the search returns k of them; ask for rerank >= k"
    )
    assert not (tmp_path / "out").exists()
