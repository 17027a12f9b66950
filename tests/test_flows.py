"""The Prefect flow, once through the engine (an ephemeral Prefect server, as on a laptop)."""

from __future__ import annotations

import importlib.util
import logging
import shutil
from pathlib import Path

import pytest

from docvec import Index, IngestReport, Settings

ROOT = Path(__file__).resolve().parents[1]


def _load_flow_module() -> object:
    spec = importlib.util.spec_from_file_location("docvec_flow_ingest", ROOT / "flows" / "ingest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    module = _load_flow_module()
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
