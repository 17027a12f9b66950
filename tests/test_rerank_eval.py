"""`docvec eval --rerank`: every mode scored as it is and with the reranker's second stage, on a dataset
built here, with the tiny random-weight models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from docvec._cli import app

from .helpers import docvec_env, eval_dataset

#: small pages (about 12 image tokens for the embedder, 16 for the reranker): fast, and the same path
SMALL = 28 * 28 * 16
runner = CliRunner()


def _env(tmp_path: Path, tiny_dir: Path, **more: str | None) -> dict[str, str | None]:
    env: dict[str, str | None] = {
        **docvec_env(tmp_path / "user-data", tiny_dir, max_pixels=SMALL, threads=2),
        "DOCVEC_RERANK_MODEL": None,
        "DOCVEC_RERANK": None,
        "COLUMNS": "300",
    }
    return env | more


def test_eval_rerank_json_has_each_mode_plain_and_reranked(
    tmp_path: Path, tiny_dir: Path, reranker_dir: Path
) -> None:
    ds = eval_dataset(tmp_path / "ds")
    args = ["eval", str(ds), "-k", "2", "--rerank", "2", "--mode", "dense", "--mode", "text", "--json"]
    r = runner.invoke(app, [*args, "--rerank-model", str(reranker_dir)], env=_env(tmp_path, tiny_dir))
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
    env = _env(tmp_path, tiny_dir, DOCVEC_RERANK_MODEL=str(tmp_path / "no-reranker"), DOCVEC_RERANK="3")
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
        app, ["eval", str(ds), *args], env=_env(tmp_path, tiny_dir, DOCVEC_RERANK_MODEL=named or None)
    )
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and message.format(tmp=tmp_path) in lines[0], r.output
