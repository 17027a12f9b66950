"""Serving, scheduled ingestion and commands on one machine, on the embedded store: while `docvec serve`
holds a data folder, commands and flows send their work to it; while another command holds it, they wait
for their turn."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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


#: a docvec command whose every page takes a second more to embed: a long ingest or reindex, as it were
_SLOW_PAGES = (
    "import time\n"
    "from docvec._pipeline import _ingest\n"
    "_embed = _ingest.Ingestor._embed\n"
    "def slow(self, page):\n"
    "    time.sleep(1.0)\n"
    "    return _embed(self, page)\n"
    "_ingest.Ingestor._embed = slow\n"
)


def _slow_docvec(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    code = f"import sys\n{_SLOW_PAGES}from docvec._cli import app\napp(sys.argv[1:])\n"
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def _answered_while(
    proc: subprocess.Popen[str], *args: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``docvec ARGS`` from another shell once ``proc`` holds the store and works (its first pages)."""
    data = Path(env["DOCVEC_DATA_DIR"])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.name == ".owner.json" and "reads_only" in p.read_text() for p in data.rglob(".owner.json")):
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the command ended before it was asked anything"
    started = time.monotonic()
    r = docvec(*args, env={**env, "DOCVEC_STORE_WAIT_S": "600"})
    assert proc.poll() is None, "the answer came only after the command's end"
    assert time.monotonic() - started < 60
    return r


@pytest.mark.parametrize("command", ["reindex", "ingest"])
def test_searches_go_on_while_a_command_holds_the_store(
    command: str, tmp_path: Path, documents: Path, tiny_dir: Path
) -> None:
    env = _env(tmp_path / "data", tiny_dir)
    pdf = documents / "pysamples__pdflatex-4-pages.pdf"
    assert docvec("ingest", str(documents / "pysamples__smile.png"), env=env).returncode == 0
    if command == "reindex":  # pages enough for the reindex to take a while
        assert docvec("ingest", str(pdf), env=env).returncode == 0
    args = ["reindex", "--max-pixels", str(TINY * 2)] if command == "reindex" else ["ingest", str(pdf)]
    proc = _slow_docvec(*args, env=env)
    try:
        found = _answered_while(proc, "search", "a smiling face", "-k", "10", "--json", env=env)
        assert found.returncode == 0, found.stderr
        assert "sending this to http://127.0.0.1:" in found.stderr
        sources = [h["source"] for h in json.loads(found.stdout)]
        # the live version's pages: all five during a reindex; during the ingest, the document being
        # written is not searchable yet
        smile = str(documents / "pysamples__smile.png")
        assert sorted(set(sources)) == ([str(pdf), smile] if command == "reindex" else [smile]), sources
        listed = docvec("documents", "--json", env=env)
        assert listed.returncode == 0 and proc.poll() is None, listed.stderr
        # the command's server refuses writes, whoever sends them, with the owner's token too
        owner = next(json.loads(p.read_text()) for p in (tmp_path / "data").rglob(".owner.json"))
        doc_id = json.loads(listed.stdout)[0]["doc_id"]
        refused = httpx.delete(f"{owner['api']}/documents/{doc_id}", headers={"x-api-key": owner["token"]})
        assert refused.status_code == 503 and refused.json()["error"] == "StoreBusyError", refused.text
        assert "answers searches only" in refused.json()["detail"]
        # a write waits for the command's end, as before, and says what it waits for
        writer = subprocess.Popen(
            [DOCVEC, "delete", str(documents / "pysamples__smile.png")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env, "DOCVEC_STORE_WAIT_S": "600"},
        )
        assert writer.stderr is not None
        assert "waiting for process" in writer.stderr.readline()
        assert writer.poll() is None
    finally:
        _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    w_out, w_err = writer.communicate(timeout=300)
    assert writer.returncode == 0 and "removed 1 page" in w_out, w_err
