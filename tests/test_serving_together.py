"""Serving, scheduled ingestion and commands on one machine, on the embedded store: while `docvec serve`
holds a data folder, commands and flows send their work to it; while another command holds it, they wait
for their turn."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from docvec import Index, IngestReport

from .helpers import TINY, docvec_env, load_flow
from .processes import DOCVEC, docvec, served

ROOT = Path(__file__).resolve().parents[1]


def _env(data: Path, tiny_dir: Path) -> dict[str, str]:
    return docvec_env(data, tiny_dir, max_pixels=TINY)


def _folder(tmp_path: Path, documents: Path, name: str, files: tuple[str, ...]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for f in files:
        shutil.copy(documents / f, folder / f)
    return folder


def test_commands_and_a_flow_run_send_their_work_to_the_server(
    prefect_harness: None, tmp_path: Path, documents: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(tmp_path / "data", tiny_dir)
    first = _folder(tmp_path, documents, "first", ("pysamples__smile.png",))
    cli = _folder(
        tmp_path, documents, "cli", ("pysamples__pdflatex-4-pages.pdf", "pysamples__multicolumn.pdf")
    )
    scheduled = _folder(tmp_path, documents, "scheduled", ("pysamples__minimal-document.pdf",))
    assert docvec("ingest", str(first), env=env).returncode == 0
    with served(env, tmp_path / "serve.log") as server:
        answered: list[int] = []
        failures: list[str] = []
        stop = threading.Event()

        def keep_searching() -> None:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                while not stop.is_set():
                    try:
                        r = http.get("/search", params={"q": "a smiling face", "k": 3})
                        r.raise_for_status()
                        hits = r.json()["hits"]
                        (answered if hits else failures).append(len(hits) or 0)
                    except httpx.HTTPError as e:
                        failures.append(str(e))

        searcher = threading.Thread(target=keep_searching)
        searcher.start()
        try:
            # a command: its work goes to the server, which says so in one line
            r = docvec("ingest", str(cli), "--json", env=env, timeout=600)
            assert r.returncode == 0, r.stderr[-3000:]
            assert f"sending this to {server.url}" in r.stderr
            report = IngestReport.model_validate_json(r.stdout)
            assert (report.documents_indexed, report.failures) == (2, [])
            during = len(answered)
            # a flow run through the Prefect engine, on the same data folder
            for key, value in env.items():
                monkeypatch.setenv(key, value)
            module = load_flow("ingest")
            state = module.ingest_flow([str(scheduled)], return_state=True)
            assert state.is_completed(), state.message
            flowed: IngestReport = state.result()
            assert (flowed.documents_indexed, flowed.pages_indexed) == (1, 1)
            # the other commands too
            r = docvec("search", "a smiling face", "--json", env=env)
            assert r.returncode == 0 and len(json.loads(r.stdout)) == 5, r.stderr[-2000:]
            r = docvec("documents", "--json", env=env)
            assert len(json.loads(r.stdout)) == 4
            r = docvec("delete", str(cli / "pysamples__multicolumn.pdf"), env=env)
            assert r.returncode == 0 and "removed" in r.stdout, r.stderr[-2000:]
            r = docvec("collections", "list", "--json", env=env)
            assert [v["pages"] for v in json.loads(r.stdout)] == [1 + 4 + 1]
        finally:
            stop.set()
            searcher.join(timeout=120)
        assert not failures, failures[:5]
        assert during > 0 and len(answered) > during  # searches answered while the others worked
        pages = httpx.get(f"{server.url}/healthz").json()["pages"]
    assert pages == 6
    with Index.open(env["DOCVEC_DATA_DIR"], model=str(tiny_dir)) as index:  # the server let go
        assert index.count() == 6


def test_a_command_waits_for_another_to_finish(tmp_path: Path, documents: Path, tiny_dir: Path) -> None:
    env = _env(tmp_path / "data", tiny_dir)
    held = Index.open(env["DOCVEC_DATA_DIR"])  # a long run in another process, as it were
    proc = subprocess.Popen(
        [DOCVEC, "ingest", str(documents / "pysamples__smile.png"), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env, "DOCVEC_STORE_WAIT_S": "120"},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # it says at once what it waits for
        assert f"waiting for process {os.getpid()}" in line and "DOCVEC_STORE_WAIT_S" in line, line
        time.sleep(1.0)
        assert proc.poll() is None  # still waiting
    finally:
        held.close()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert IngestReport.model_validate_json(out).documents_indexed == 1
    # and one that waited long enough gives up with the reason
    with Index.open(env["DOCVEC_DATA_DIR"]):
        r = docvec("search", "x", env={**env, "DOCVEC_STORE_WAIT_S": "1"})
    assert r.returncode == 2 and str(os.getpid()) in r.stderr and "waited 1 s" in r.stderr
