"""Retrieval metrics on hand-computed cases, and `docvec eval` on a dataset built here: every mode scored as
it is and, with ``--rerank``, with the tiny random-weight reranker's second stage."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from docvec import Embedder, InputError
from docvec._cli import app
from docvec._evaluate import evaluate, load_dataset, ndcg_at, recall_at

from .helpers import SMALL, eval_dataset, index_settings, rerank_env

runner = CliRunner()


def test_ndcg_on_hand_computed_rankings() -> None:
    assert ndcg_at(["a", "b", "c"], {"a": 2, "b": 1}, 5) == pytest.approx(1.0)  # perfect
    assert ndcg_at(["b", "a"], {"a": 1}, 5) == pytest.approx(1 / math.log2(3))  # relevant one at rank 2
    # graded, swapped: (1 + 2/log2 3) / (2 + 1/log2 3)
    expected = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert ndcg_at(["b", "a"], {"a": 2, "b": 1}, 5) == pytest.approx(expected)
    assert ndcg_at(["x", "y"], {"a": 1}, 5) == 0.0
    assert ndcg_at(["a"], {}, 5) == 0.0 and ndcg_at(["a"], {"a": 0}, 5) == 0.0
    # the cut-off: a relevant page at rank 6 does not count for nDCG@5
    assert ndcg_at(["x1", "x2", "x3", "x4", "x5", "a"], {"a": 1}, 5) == 0.0
    # more relevant pages than the cut-off: the ideal is the best k of them
    assert ndcg_at(["a", "b"], {"a": 1, "b": 1, "c": 1}, 2) == pytest.approx(1.0)


def test_recall_on_hand_computed_rankings() -> None:
    rel = {"a": 1, "b": 2, "c": 1, "z": 0}
    assert recall_at(["a", "x", "b"], rel, 2) == pytest.approx(1 / 3)
    assert recall_at(["a", "x", "b"], rel, 3) == pytest.approx(2 / 3)
    assert recall_at(["z", "c", "b", "a"], rel, 10) == pytest.approx(1.0)
    assert recall_at(["a"], {}, 5) == 0.0
    with pytest.raises(InputError):
        recall_at(["a"], rel, 0)


def test_load_dataset(tmp_path: Path) -> None:
    data = load_dataset(eval_dataset(tmp_path / "ds"))
    assert len(data.queries) == 5
    assert data.qrels["q1"] == {"alpha#1": 1.0} and data.qrels["q3"] == {"report#2": 1.0}
    (tmp_path / "ds" / "qrels.tsv").write_text("q9\talpha\t1\n")
    with pytest.raises(InputError, match="q9"):
        load_dataset(tmp_path / "ds")
    with pytest.raises(InputError, match=r"queries\.jsonl is missing"):
        load_dataset(tmp_path)


def test_evaluate_with_the_tiny_model(tmp_path: Path, tiny_dir: Path, small_embedder: Embedder) -> None:
    ds = eval_dataset(tmp_path / "ds")
    s = index_settings(tmp_path / "user-data", tiny_dir)
    report = evaluate(ds, s, k=10, embedder=small_embedder)
    assert (report.queries, report.queries_unjudged, report.pages_indexed) == (4, 1, 6)
    assert report.documents_failed == 0
    # k=10 covers the whole 6-page corpus, so every relevant page is found whatever the (random) model does
    assert report.recall_at_k == pytest.approx(1.0)
    assert 0.0 <= report.ndcg_at_5 <= 1.0
    ids = {"alpha#1", "beta#1", "gamma#1", "delta#1", "report#1", "report#2"}
    assert all(set(r.ranked) == ids for r in report.per_query)
    assert not (tmp_path / "user-data").exists()  # the user's index is never touched


@pytest.mark.parametrize("model", ["tiny_dir", "qwen3vl_dir"])
def test_cli_eval_json_and_errors(tmp_path: Path, model: str, request: pytest.FixtureRequest) -> None:
    """`docvec eval` on both families' tiny models (the second ranks by last-token vectors)."""
    ds = eval_dataset(tmp_path / "ds")
    env = {
        "DOCVEC_DATA_DIR": str(tmp_path / "user-data"),
        "DOCVEC_MODEL": str(request.getfixturevalue(model)),
        "DOCVEC_EMBED__MAX_PIXELS": str(SMALL),
    }
    r = runner.invoke(app, ["eval", str(ds), "-k", "2", "--json"], env=env)
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["queries"] == 4 and got["k"] == 2
    for metric in ("ndcg@5", "recall@2"):
        assert isinstance(got[metric], float) and 0.0 <= got[metric] <= 1.0
    r = runner.invoke(app, ["eval", str(ds)], env=env)
    assert r.exit_code == 0 and "nDCG@5" in r.stdout and "recall@10" in r.stdout
    r = runner.invoke(app, ["eval", str(tmp_path / "nothing")], env=env)
    assert r.exit_code == 2 and "missing" in r.output


# -- docvec eval --rerank ---------------------------------------------------------------------------------


def _rerank_env(tmp_path: Path, tiny_dir: Path, **more: str | None) -> dict[str, str | None]:
    return rerank_env(tmp_path / "user-data", tiny_dir, **more)


def test_eval_rerank_json_has_each_mode_plain_and_reranked(
    tmp_path: Path, tiny_dir: Path, reranker_dir: Path
) -> None:
    ds = eval_dataset(tmp_path / "ds")
    args = ["eval", str(ds), "-k", "2", "--rerank", "2", "--mode", "dense", "--mode", "text", "--json"]
    r = runner.invoke(app, [*args, "--rerank-model", str(reranker_dir)], env=_rerank_env(tmp_path, tiny_dir))
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert (got["queries"], got["k"], got["rerank"], got["pages_indexed"]) == (4, 2, 2, 6)
    modes = got["modes"]
    assert list(modes) == ["dense", "dense+rerank2", "text", "text+rerank2"]
    for scores in modes.values():
        assert set(scores) == {"ndcg@5", "recall@2"} and all(0.0 <= v <= 1.0 for v in scores.values())
    assert (got["ndcg@5"], got["recall@2"]) == (modes["dense"]["ndcg@5"], modes["dense"]["recall@2"])
    # reranking the first stage's k best and keeping k reorders the same pages: the same recall@k
    for mode in ("dense", "text"):
        assert modes[f"{mode}+rerank2"]["recall@2"] == pytest.approx(modes[mode]["recall@2"])
    assert not (tmp_path / "user-data").exists()  # the user's index is never touched


def test_eval_without_rerank_never_reranks_and_says_nothing_of_it(tmp_path: Path, tiny_dir: Path) -> None:
    """DOCVEC_RERANK set for searches does not rerank eval's plain runs (and no reranker is loaded: the model
    named does not exist)."""
    ds = eval_dataset(tmp_path / "ds")
    env = _rerank_env(
        tmp_path, tiny_dir, DOCVEC_RERANK_MODEL=str(tmp_path / "no-reranker"), DOCVEC_RERANK="3"
    )
    r = runner.invoke(app, ["eval", str(ds), "-k", "2", "--mode", "dense", "--json"], env=env)
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["rerank"] == 0 and list(got["modes"]) == ["dense"]


@pytest.mark.parametrize(
    ("args", "model", "message"),
    [
        (["-k", "2", "--rerank", "3"], None, "the second stage needs a reranker: set DOCVEC_RERANK_MODEL"),
        (["-k", "4", "--rerank", "3"], "reranker", "rerank (3) is below k (4)"),
        (["--rerank", "101"], "reranker", "rerank must be from 0 (off) to 100 pages, not 101"),
        (["-k", "2", "--rerank", "3"], "{tmp}/no-reranker", "{tmp}/no-reranker: no such file or folder"),
    ],
)
def test_eval_rerank_errors_are_one_line_before_any_indexing(
    args: list[str], model: str | None, message: str, tmp_path: Path, tiny_dir: Path, reranker_dir: Path
) -> None:
    ds = eval_dataset(tmp_path / "ds")
    named = {"reranker": str(reranker_dir)}.get(model or "", (model or "").format(tmp=tmp_path))
    r = runner.invoke(
        app, ["eval", str(ds), *args], env=_rerank_env(tmp_path, tiny_dir, DOCVEC_RERANK_MODEL=named or None)
    )
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and message.format(tmp=tmp_path) in lines[0], r.output
