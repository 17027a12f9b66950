"""The REST API as a contract: schemathesis (its command, as a user runs it) against a running ``docvec
serve`` and the OpenAPI document it serves. It generates requests the schema allows and requests it
refuses, and runs all its checks on every answer: no 5xx, only documented status codes, content types and
headers (405s name every method a path takes in ``Allow``), bodies that match their schemas, schema-valid
requests accepted and invalid ones refused. Per-operation allowances, each with its reason, are in
``tests/schemathesis.toml``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from docvec import Index, Settings

from .helpers import TINY, copy_documents, docvec_env
from .processes import served

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
#: examples per operation and phase: every check on every operation in about a minute on 2 cores
EXAMPLES = 60
#: They start background work on the server's own files (a generated path can be "/", a generated spec
#: a reindex with any settings): test_api checks their requests instead.
NOT_GENERATED = ("/ingest", "/reindex")


def test_the_api_keeps_its_contract(tmp_path: Path, tiny_dir: Path, documents: Path) -> None:
    data = tmp_path / "data"
    corpus = copy_documents(documents, tmp_path / "corpus", ["pysamples__smile.png"])
    with Index.open(Settings(data_dir=data, model=str(tiny_dir), embed={"max_pixels": TINY})) as ix:
        assert ix.add([corpus], tags=["team=legal"]).ok
    with served(docvec_env(data, tiny_dir, max_pixels=TINY), tmp_path / "serve.log") as server:
        excluded = [arg for path in NOT_GENERATED for arg in ("--exclude-path", path)]
        run = subprocess.run(
            [
                SCHEMATHESIS,
                "--config-file",
                str(Path(__file__).with_name("schemathesis.toml")),
                "run",
                f"{server.url}/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                str(EXAMPLES),
                "--seed",
                "20261203",  # the same requests each run; change it (or raise EXAMPLES) to look further
                "--no-color",
                *excluded,
            ],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
        )
        assert run.returncode == 0, run.stdout[-12000:] + run.stderr[-2000:] + server.tail()
        # every operation but the two was tested
        assert re.search(r"Selected: (\d+)/(\d+)\s+Tested: \1\b", run.stdout), run.stdout[-3000:]
        # 22 operations (a page's text, the search page's session, a file's HEAD, a job's cancel among
        # them) and the two
        assert int(re.search(r"Selected: \d+/(\d+)", run.stdout)[1]) == 22 + len(NOT_GENERATED)
