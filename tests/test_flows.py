"""The Prefect flows, once through the engine (an ephemeral Prefect server, as on a laptop): the ingest flow,
the batch-query flow with a second stage and its script's check of ``--rerank`` before any flow runs, the
reindex flow's options, and the flows' telemetry."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docvec import Embedder, Index, IngestFailure, IngestReport, ReindexSpec, Settings

from .documents import FILLER, RARE, filler_pdfs
from .helpers import ROOT, SMALL, index_settings, load_flow


@pytest.mark.parametrize("model", ["tiny_dir", "qwen3vl_dir"])
def test_ingest_flow_indexes_then_skips(
    prefect_harness: None,
    tmp_path: Path,
    documents: Path,
    model: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ingest flow on both families' tiny models."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("pysamples__minimal-document.pdf", "pysamples__smile.png", "qpdf__bad1.pdf"):
        shutil.copy(documents / name, docs / name)
    monkeypatch.setenv("DOCVEC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCVEC_MODEL", str(request.getfixturevalue(model)))
    monkeypatch.setenv("DOCVEC_EMBED__MAX_PIXELS", str(SMALL))
    module = load_flow("ingest")
    flow = module.ingest_flow  # type: ignore[attr-defined]

    # a failure makes the run Failed (visible in the Prefect UI), and its report is read all the same
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    run_logger = logging.getLogger("prefect.flow_runs")  # Prefect's run loggers do not propagate
    run_logger.addHandler(handler)
    _at_info(run_logger, monkeypatch)
    state = flow([str(docs)], tags=["via=prefect"], return_state=True)
    first: IngestReport = module.report_of(state)  # type: ignore[attr-defined]
    assert (first.documents_indexed, first.pages_indexed, first.documents_failed) == (2, 2, 1)
    assert "not a document" in first.failures[0].reason
    # the state's message, what the UI's list of runs shows, says which file and why
    assert state.is_failed()
    bad = docs / "qpdf__bad1.pdf"
    assert state.message == f"1 failure (max_failures=0): {bad}: {first.failures[0].reason}"
    run_logger.removeHandler(handler)
    logged = [(r.levelname, r.getMessage()) for r in records]
    assert ("INFO", first.summary()) in logged  # the run's log says what it did...
    assert any(level == "WARNING" and "qpdf__bad1.pdf: not a document" in m for level, m in logged)
    # with a threshold above the failures the run completes; its tags change in place, no re-embedding
    second: IngestReport = flow([str(docs)], tags=["via=prefect", "again=yes"], max_failures=1)
    assert (second.documents_indexed, second.documents_skipped, second.documents_updated) == (0, 2, 2)

    with Index.open(Settings()) as index:
        payloads = [p for _, p in index._store.scroll("docvec")]
        live = [v.profile for v in index.versions() if v.live]
    assert len(payloads) == 2 and all(p["tags"] == ["again=yes", "via=prefect"] for p in payloads)
    assert live == [{"tiny_dir": "jina-embeddings-v4", "qwen3vl_dir": "qwen3-vl-embedding"}[model]]


def _run_records(monkeypatch: pytest.MonkeyPatch) -> list[logging.LogRecord]:
    """The records of Prefect's flow-run and task-run loggers from now on (they do not propagate), as their
    handlers get them."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        monkeypatch.setattr(logger, "handlers", [*logger.handlers, handler])  # until the test's end
        _at_info(logger, monkeypatch)
    return records


def _at_info(logger: logging.Logger, monkeypatch: pytest.MonkeyPatch) -> None:
    """``logger`` at INFO until the test's end. By ``setLevel``, which also drops what the logger decided
    of INFO before: a flow run of an earlier test asked it at the suite's WARNING, and a level set on the
    attribute alone would leave that answer standing."""
    monkeypatch.setattr(logger, "level", logger.level)  # restored at the test's end
    logger.setLevel(logging.INFO)


def test_a_docvec_error_is_one_line_in_the_runs_log_and_a_crash_keeps_its_traceback(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCVEC_DATA_DIR", str(tmp_path / "data"))
    module = load_flow("query")
    queries = tmp_path / "queries.txt"
    queries.write_text('total amount due\n{"query": "a smiling face", "k": 0}\n')

    records = _run_records(monkeypatch)
    state = module.query_flow(str(queries), str(tmp_path / "out"), return_state=True)  # type: ignore[attr-defined]
    assert state.is_failed()
    why = f"InputError: {queries}: line 2: k must be"
    assert why in (state.message or "")
    assert not [r for r in records if r.exc_info or r.exc_text], [r.getMessage() for r in records]
    # the task, the flow and the engine each log the one exception; it reads once, where it arose
    errors = [r for r in records if r.levelno >= logging.ERROR and r.getMessage().startswith(why)]
    assert [r.name for r in errors] == ["prefect.task_runs"], [r.getMessage() for r in records]

    # an exception docvec did not mean is a crash: its traceback is kept, for whoever must fix it
    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("not a docvec error")

    monkeypatch.setattr(module, "read_queries", crash)
    records.clear()
    state = module.query_flow(str(queries), str(tmp_path / "out"), return_state=True)  # type: ignore[attr-defined]
    assert state.is_failed()
    crashed = [r for r in records if r.exc_info and isinstance(r.exc_info[1], RuntimeError)]
    assert {r.name for r in crashed} == {"prefect.task_runs", "prefect.flow_runs"}, crashed
    assert all("Traceback" in logging.Formatter().format(r) for r in crashed)


def test_a_failed_runs_message_counts_its_failures_and_names_the_first() -> None:
    failures_line = load_flow("ingest").failures_line  # type: ignore[attr-defined]
    one = [IngestFailure(path="/srv/a.pdf", reason="corrupt")]
    assert failures_line(one, " (max_failures=0)") == "1 failure (max_failures=0): /srv/a.pdf: corrupt"
    three = [*one, IngestFailure(path="/srv/b.pdf", page=2, reason="x"), IngestFailure(path="/c", reason="y")]
    assert failures_line(three) == "3 failures: /srv/a.pdf: corrupt (and 2 more, each in the run's log)"
    assert failures_line([], " (max_failures=-1)") == "0 failures (max_failures=-1)"


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


def test_the_batch_query_flow_hands_each_hit_its_page_text(
    prefect_harness: None,
    tmp_path: Path,
    small_embedder: Embedder,
    tiny_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = tmp_path / "data"
    with Index.open(index_settings(data, tiny_dir, ocr="off"), embedder=small_embedder) as index:
        assert index.add(filler_pdfs(tmp_path / "docs", rare_on=7)).ok
    env = {
        "DOCVEC_DATA_DIR": str(data),
        "DOCVEC_MODEL": str(tiny_dir),
        "DOCVEC_EMBED__MAX_PIXELS": str(SMALL),
        "DOCVEC_SEARCH_MODE": "text",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    module = load_flow("query")
    queries = tmp_path / "queries.txt"
    queries.write_text(f"{RARE}\nwarranty terms\n")
    out = tmp_path / "hits.jsonl"
    assert module.query_flow(str(queries), str(out), k=1, with_text=True) == 2
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["hits"][0]["name"] for r in rows] == ["doc-07.pdf", "doc-04.pdf"]
    assert RARE in rows[0]["hits"][0]["text"] and FILLER[4] in rows[1]["hits"][0]["text"]
    assert rows[1]["hits"][0]["snippet"]["marks"]


def test_the_reindex_flow_takes_every_option_of_docvec_reindex() -> None:
    module = load_flow("reindex")
    options = {action.dest for action in module.parser()._actions}  # type: ignore[attr-defined]
    assert set(ReindexSpec.model_fields) <= options
    spec_from_args = module.spec_from_args  # type: ignore[attr-defined]
    assert spec_from_args([]) == ReindexSpec()  # unset: the collection's own
    assert spec_from_args(["--multivector", "--token-pool", "2", "--dim", "32", "--drop-old"]) == ReindexSpec(
        multivector=True, token_pool=2, dim=32, drop_old=True
    )
    assert spec_from_args(["--single-vector", "--no-text"]) == ReindexSpec(multivector=False, text=False)


def test_the_flows_turn_prefect_telemetry_off_before_prefect_loads() -> None:
    for name in ("ingest", "query", "reindex"):
        text = (ROOT / "flows" / f"{name}.py").read_text(encoding="utf-8")
        assert text.index("import _offline") < text.index("from prefect"), name
    env = {
        k: v for k, v in os.environ.items() if k not in ("DO_NOT_TRACK", "PREFECT_SERVER_ANALYTICS_ENABLED")
    }
    code = (
        "import sys, os; sys.path.insert(0, 'flows'); import _offline; "
        "from prefect.settings import get_current_settings as s; "
        "print(os.environ['DO_NOT_TRACK'], s().server.analytics_enabled)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and r.stdout.split() == ["1", "False"], r.stdout + r.stderr


def test_docs_prefect_deploys_the_users_own_folder_without_telemetry() -> None:
    text = (ROOT / "docs" / "prefect.md").read_text(encoding="utf-8")
    setup = text[text.index("## Set-up on one machine") :].split("```sh", 1)[1].split("```", 1)[0]
    assert "export DO_NOT_TRACK=1 PREFECT_SERVER_ANALYTICS_ENABLED=false" in setup
    # as tests/test_deployments.py's `deployed` does after `deploy --all`: prefect.yaml's /documents is the
    # container's folder, which a machine of one's own does not have
    lines = [ln.split("#")[0].strip() for ln in setup.splitlines()]
    assert lines.index("prefect deploy --all") < lines.index(
        'prefect deploy --name scheduled --param "paths=[\\"$HOME/papers\\"]"'
    )
