"""A newcomer's path through the command line: the version, the test model by name, listing and deleting
documents, what `docvec serve` says, and `models pull` without a network."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from docvec import Index, __version__
from docvec._cli import app

from .helpers import SMALL, page_image
from .processes import docvec, free_port

runner = CliRunner()


@pytest.fixture()
def cache(tmp_path: Path, tiny_dir: Path) -> Path:
    """A docvec cache folder whose built tiny model is the session's (as `docvec demo` leaves it)."""
    folder = tmp_path / "cache"
    (folder / "models").mkdir(parents=True)
    (folder / "models" / "tiny").symlink_to(tiny_dir, target_is_directory=True)
    return folder


@pytest.fixture()
def indexed(tmp_path: Path, cache: Path) -> dict[str, str]:
    """The environment of an index of three one-page images, made with the model named `tiny`."""
    env = {
        "DOCVEC_CACHE_DIR": str(cache),
        "DOCVEC_DATA_DIR": str(tmp_path / "data"),
        "DOCVEC_MODEL": "tiny",
        "DOCVEC_EMBED__MAX_PIXELS": str(SMALL),
    }
    docs = tmp_path / "docs"
    docs.mkdir()
    for seed in (1, 2, 3):
        page_image(200, 260, seed=seed).save(docs / f"page {seed}.png")
    r = runner.invoke(app, ["ingest", str(docs), "--tag", "team=ops"], env=env)
    assert r.exit_code == 0, r.output
    return env


def test_version() -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout.strip() == f"docvec {__version__}"


def test_the_test_model_goes_by_name(cache: Path) -> None:
    env = {"DOCVEC_CACHE_DIR": str(cache)}
    listed = runner.invoke(app, ["models", "list"], env=env)
    assert listed.exit_code == 0 and re.search(r"^tiny .*│ F16\s*$", listed.stdout, re.M), listed.stdout
    pulled = runner.invoke(app, ["models", "pull", "tiny"], env=env)  # built already: found at once
    assert pulled.exit_code == 0 and "DOCVEC_MODEL=tiny" in pulled.stdout
    r = runner.invoke(app, ["embed", "-q", "hello", "--json"], env={**env, "DOCVEC_MODEL": "tiny"})
    assert r.exit_code == 0 and len(json.loads(r.stdout)[0]["vector"]) == 64
    empty = {"DOCVEC_CACHE_DIR": str(cache.parent / "empty"), "DOCVEC_MODEL": "tiny"}
    r = runner.invoke(app, ["embed", "-q", "hello"], env=empty)
    assert r.exit_code == 2 and "docvec models pull tiny" in " ".join(r.output.split())
    # a name docvec does not know is not sent to `models pull`, where it could only fail
    r = runner.invoke(app, ["embed", "-q", "hello"], env={**empty, "DOCVEC_MODEL": "nosuchmodel"})
    said = " ".join(r.output.split())
    assert (
        r.exit_code == 2 and "models pull" not in said and "jina-v4" in said and "docvec models list" in said
    )


def test_documents_lists_whole_ids_and_delete_takes_a_prefix(indexed: dict[str, str]) -> None:
    r = runner.invoke(app, ["documents", "--json"], env=indexed)
    assert r.exit_code == 0, r.output
    docs = json.loads(r.stdout)
    assert sorted(d["name"] for d in docs) == ["page 1.png", "page 2.png", "page 3.png"]
    assert all(len(d["doc_id"]) == 32 and d["tags"] == {"team": "ops"} for d in docs)
    for width in ("200", "80", "40"):  # whole, to copy, at any width (CliRunner's output is a pipe)
        table = runner.invoke(app, ["documents"], env={**indexed, "COLUMNS": width})
        assert all(d["doc_id"] in table.stdout for d in docs), table.stdout
        assert all(d["name"] in table.stdout for d in docs), table.stdout
    hits = runner.invoke(app, ["search", "a page", "-k", "3"], env={**indexed, "COLUMNS": "80"})
    assert hits.exit_code == 0 and all(d["doc_id"] in hits.stdout for d in docs), hits.stdout
    ids = sorted(d["doc_id"] for d in docs)
    # the shortest prefix that only one id has
    prefix = next(
        ids[0][:n] for n in range(1, 33) if sum(i.startswith(ids[0][:n]) for i in ids) == 1 and n >= 4
    )
    r = runner.invoke(app, ["delete", prefix], env={**indexed, "COLUMNS": "200"})
    gone = next(d for d in docs if d["doc_id"] == ids[0])
    # the answer names the document, whole, not the prefix typed
    assert r.exit_code == 0 and f"removed 1 page of {gone['name']} ({gone['doc_id']})" in r.stdout, r.output
    assert len(json.loads(runner.invoke(app, ["documents", "--json"], env=indexed).stdout)) == 2
    r = runner.invoke(app, ["delete", "ffffffffff"], env=indexed)
    assert r.exit_code == 1 and "nothing indexed under ffffffffff" in r.output


def test_collections_list_at_80_columns_cuts_nothing(indexed: dict[str, str]) -> None:
    """A pipe's 80 columns: the columns that fit, each value whole (none cut to "docvec…"), no line wider;
    narrower still, a record a version; --json has every field."""
    (version,) = json.loads(runner.invoke(app, ["collections", "list", "--json"], env=indexed).stdout)
    for width in (80, 40):
        r = runner.invoke(app, ["collections", "list"], env={**indexed, "COLUMNS": str(width)})
        assert r.exit_code == 0, r.output
        assert "…" not in r.stdout and max(map(len, r.stdout.splitlines())) <= width, r.stdout
        for value in (version["version"], version["model"], version["state"], str(version["pages"])):
            assert re.search(rf"(^|[\s│:]){re.escape(value)}(\s|$)", r.stdout, re.M), (value, r.stdout)


def test_documents_of_an_empty_index_says_how_to_add_and_where_it_looked(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    r = runner.invoke(app, ["documents"], env={"DOCVEC_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "200"})
    assert r.exit_code == 0 and "docvec ingest" in r.output and str(tmp_path / "data") in r.output


@pytest.mark.parametrize(
    "command", [["documents"], ["search", "total amount due"], ["delete", "abc123"], ["collections", "list"]]
)
def test_reading_commands_never_make_a_mistyped_data_folder(tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "dcovec-data"
    r = runner.invoke(
        app, command, env={"DOCVEC_DATA_DIR": str(typo), "DOCVEC_MODEL": "tiny", "COLUMNS": "200"}
    )
    assert r.exit_code == 2, r.output
    assert f"there is no docvec data folder at {typo}" in " ".join(r.output.split())
    assert not typo.exists()


def test_serve_says_where_and_what_and_logs_at_info(indexed: dict[str, str]) -> None:
    port = free_port()
    exe = Path(sys.executable).with_name("docvec")
    proc = subprocess.Popen(
        [str(exe), "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **indexed},
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline and proc.poll() is None, "the server did not start"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        httpx.get(f"http://127.0.0.1:{port}/search", params={"q": "x"}, timeout=30)
        # a second server on the same folder is told where the first one listens
        second = docvec("serve", "--port", str(free_port()), env={**indexed, "COLUMNS": "300"})
        said = [ln for ln in second.stderr.splitlines() if ln.strip()]
        assert second.returncode == 2 and len(said) == 1, second.stderr
        assert f"It is `docvec serve` at http://127.0.0.1:{port}: send the work to" in said[0], said
    finally:
        proc.send_signal(signal.SIGINT)
        _, errs = proc.communicate(timeout=60)
    banner = " ".join(errs.split())
    assert f"http://127.0.0.1:{port}/ (search page)" in banner and f"http://127.0.0.1:{port}/docs" in banner
    assert f"collection 'docvec' in the embedded store in {indexed['DOCVEC_DATA_DIR']}: 3 pages" in banner
    assert "model tiny (tiny-qwen25vl-F16.gguf)" in banner and "readers need no key" in banner
    assert "the operator's endpoints answer this machine's programs only" in banner
    assert '"GET /search?q=x HTTP/1.1" 200' in errs  # request logs at INFO, on stderr


def test_serve_on_a_busy_store_is_one_line(indexed: dict[str, str]) -> None:
    with Index.open(Path(indexed["DOCVEC_DATA_DIR"])):  # this process holds the embedded store
        r = docvec("serve", "--port", str(free_port()), env=indexed)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "is in use by process" in r.stderr


def test_serve_on_a_taken_port_is_one_line_and_no_banner(indexed: dict[str, str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = docvec("serve", "--port", str(port), env={**indexed, "COLUMNS": "300"})
    said = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("INFO ")]
    assert r.returncode == 2 and "serves http" not in r.stderr, r.stderr
    assert said == [
        f"error: cannot listen on 127.0.0.1:{port}: another server listens there; choose another with --port"
    ], said


def test_serve_with_a_missing_model_is_one_line(indexed: dict[str, str], tmp_path: Path) -> None:
    env = {**indexed, "DOCVEC_MODEL": str(tmp_path / "no-such-model")}
    r = docvec("serve", "--port", str(free_port()), env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "startup failed" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if not ln.startswith("INFO ")]  # the log is at INFO here
    assert len(errors) == 1 and errors[0].startswith("error: ") and "no-such-model" in errors[0], r.stderr


def test_pull_without_a_network_says_it_once(tmp_path: Path) -> None:
    env = {"HF_HUB_CACHE": str(tmp_path / "hf"), "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    env_run = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    exe = Path(sys.executable).with_name("docvec")
    r = subprocess.run(
        [str(exe), "models", "pull", "jina-v4"],
        capture_output=True,
        text=True,
        env={**env_run, **env},
        timeout=300,
    )
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and "could not be reached" in errors[0]
    assert "--model" not in errors[0] and "DOCVEC_MODEL" in errors[0]  # advice that fits `pull`
    assert not [ln for ln in lines if "Retry" in ln or "WARNING" in ln], r.stderr
