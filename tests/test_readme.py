"""The README's first steps, run as a newcomer runs them: `docvec demo`, then the quick-start block as
written, in order, offline, in a home folder of their own."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from docvec._cli._demo import NEXT_COMMANDS, sample_documents

from .helpers import ROOT, TINY
from .processes import free_port

BIN = Path(sys.executable).parent  # where `make setup` put docvec: `.venv/bin` in the README


def _quickstart() -> list[str]:
    """The commands of the README block marked ``<!-- readme-quickstart -->``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- readme-quickstart -->\s*```sh\n(.*?)```", text, re.S)
    assert block, "README.md has no quick-start block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def _run(line: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = line.replace(".venv/bin/", f"{BIN}/")
    return subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture()
def home(tmp_path: Path, tiny_dir: Path) -> dict[str, str]:
    """A newcomer's environment: a home folder where `make setup` has built nothing but the tiny model is
    already there (the suite built it once; `docvec demo` would build the same)."""
    models = tmp_path / "home" / ".cache" / "docvec" / "models"
    models.mkdir(parents=True)
    (models / "tiny").symlink_to(tiny_dir, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCVEC_")}
    return {**env, "HOME": str(tmp_path / "home"), "COLUMNS": "200"}


def test_the_demo_then_the_quickstart_as_written(home: dict[str, str]) -> None:
    demo = _run(".venv/bin/docvec demo", home)
    assert demo.returncode == 0, demo.stderr[-2000:]
    data = Path(home["HOME"]) / ".cache" / "docvec" / "demo-data"
    # the demo ends with the README's next commands, with this machine's paths
    commands = _quickstart()
    readme = {"model": "tiny", "data": "~/.cache/docvec/demo-data", "docvec": ".venv/bin/docvec"}
    assert commands == [c.format(**readme, samples="src/docvec/samples") for c in NEXT_COMMANDS]
    here = {**readme, "data": shlex.quote(str(data)), "docvec": f"{BIN}/docvec"}
    for c in NEXT_COMMANDS:
        assert c.format(**here, samples=str(sample_documents())) in demo.stdout, (c, demo.stdout)
    env = dict(home)
    assert commands[0].startswith("export ") and any(" serve" in c for c in commands)
    for line in commands:
        if line.startswith("export "):
            for assignment in shlex.split(line)[1:]:
                key, _, value = assignment.partition("=")
                env[key] = os.path.expanduser(value.replace("~", env["HOME"], 1))
            continue
        if " serve" in line:
            _serve_briefly(line, env)
            continue
        r = _run(line, env)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
        assert "Traceback" not in r.stderr and "error" not in r.stderr.lower(), (line, r.stderr)
        if " documents" in line:
            assert "invoice.pdf" in r.stdout and "quarterly-report.pdf" in r.stdout, r.stdout
        if "--json" in line and " search " in line:
            assert '"tags": {"team": "finance"}' in r.stdout, r.stdout  # the tag given to the chart


def _serve_briefly(line: str, env: dict[str, str]) -> None:
    """Start the README's `docvec serve`, see the page answer, stop it as a person does (Ctrl-C)."""
    port = free_port()
    command = re.sub(r"--port \d+", f"--port {port}", line.split("#")[0]).replace(".venv/bin/", f"{BIN}/")
    proc = subprocess.Popen(shlex.split(command), cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "docvec serve did not start"
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert page.status_code == 200 and "<title>docvec</title>" in page.text
    finally:
        proc.send_signal(signal.SIGINT)
        _, errs = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in errs, errs[-2000:]


def _library_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Library\s*```python\n(.*?)```", text, re.S)
    assert block, "README.md has no library example"
    return block.group(1)


def test_the_library_example_as_a_plain_script(home: dict[str, str], tmp_path: Path, documents: Path) -> None:
    # saved as it is, no `if __name__ == "__main__":` guard: the render workers must not run it again
    script = _library_example()
    assert "__main__" not in script and 'model="jina-v4"' in script
    (tmp_path / "home" / "papers").mkdir()
    (tmp_path / "home" / "papers" / "invoice.pdf").write_bytes(
        (documents / "pysamples__minimal-document.pdf").read_bytes()
    )
    path = tmp_path / "example.py"
    path.write_text(script.replace('model="jina-v4"', 'model="tiny"'))  # the random-weight model, offline
    env = {**home, "DOCVEC_EMBED__MAX_PIXELS": str(TINY), "DOCVEC_RENDER__WORKERS": "2"}
    run = subprocess.run(
        [sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "indexed 1 document (1 page)" in run.stdout, run.stdout + run.stderr
    assert re.search(r"^\d\.\d{3}  invoice\.pdf  page 1$", run.stdout, re.M), run.stdout
    assert "Error" not in run.stderr, run.stderr
