"""The Prefect flow, once through the engine (an ephemeral Prefect server, as on a laptop)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from docvec import Index, IngestReport, ReindexSpec, Settings

from .helpers import load_flow

ROOT = Path(__file__).resolve().parents[1]


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
    monkeypatch.setenv("DOCVEC_EMBED__MAX_PIXELS", str(28 * 28 * 64))
    module = load_flow("ingest")
    flow = module.ingest_flow  # type: ignore[attr-defined]

    # a failure makes the run Failed (visible in the Prefect UI), and its report is read all the same
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    run_logger = logging.getLogger("prefect.flow_runs")  # Prefect's run loggers do not propagate
    run_logger.addHandler(handler)
    monkeypatch.setattr(run_logger, "level", logging.INFO)
    state = flow([str(docs)], tags=["via=prefect"], return_state=True)
    assert state.is_failed() and "1 failures" in (state.message or "")
    first: IngestReport = module.report_of(state)  # type: ignore[attr-defined]
    assert (first.documents_indexed, first.pages_indexed, first.documents_failed) == (2, 2, 1)
    assert "not a document" in first.failures[0].reason
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
    import subprocess
    import sys

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
