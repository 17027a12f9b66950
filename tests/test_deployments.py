"""prefect.yaml's deployments end to end, as an operator runs them (docs/prefect.md, in its order): a run
without a server first, then a real Prefect server (`prefect server start`, SQLite) on the same
PREFECT_HOME, the set-up commands read from the page, the global concurrency limits, and a `prefect worker
start --run-once` that runs the flow runs in processes of their own.

The worker starts in a folder of its own: only the deployments' pull step tells the flow runs where the
flows are. The flow runs use the tiny test model and a temporary data folder (the worker's environment).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from uuid import UUID

import httpx
import psutil
import pytest
import yaml
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate
from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
from prefect.client.schemas.objects import FlowRun, Log, StateType

from docvec import Index, Settings

from .helpers import SMALL, copy_documents

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PREFECT = str(BIN / "prefect")
GUIDE = ROOT / "docs" / "prefect.md"
#: the documents the scheduled deployment indexes (copied from tests/data/documents), and their pages
PAGES_OF = {
    "pysamples__minimal-document.pdf": 1,
    "pysamples__smile.png": 1,
    "pysamples__pdflatex-4-pages.pdf": 4,
}
PAGES = sum(PAGES_OF.values())
WAITING = "waiting for a slot of docvec-store-writes, docvec-embed: another run holds it"
# Generous: on a loaded 2-core machine a Prefect process takes seconds just to import.
SERVER_START_S = 180
WORKER_S = 300


def _tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Process:
    """A process started for a test, with its output in a file; :meth:`stop` ends it and all it started."""

    name: str
    log: Path
    popen: subprocess.Popen[bytes]
    _out: IO[bytes] = field(repr=False)

    @classmethod
    def start(cls, name: str, args: list[str], *, env: dict[str, str], cwd: Path, log: Path) -> Process:
        out = open(log, "wb")  # noqa: SIM115 (closed by stop())
        popen = subprocess.Popen(
            args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        return cls(name, log, popen, out)

    def tail(self, lines: int = 40) -> str:
        self._out.flush()
        return f"--- {self.name} log ({self.log}) ---\n{_tail(self.log, lines)}"

    def stop(self) -> list[str]:
        """End the process and its descendants (flow-run processes start sessions of their own): SIGTERM,
        then SIGKILL for what is still there after 30 s; returns those that had to be killed."""
        if self._out.closed:  # stopped already: its pid may belong to another process by now
            return []
        try:
            tree = [psutil.Process(self.popen.pid)]
            tree += tree[0].children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        for p in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(tree, timeout=30)
        killed = []
        for p in alive:
            try:
                killed.append(f"{p.pid} {' '.join(p.cmdline())[:200]}")
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=10)
        self.popen.wait(timeout=10)
        self._out.close()
        return killed


@dataclass
class Server:
    """A Prefect server for this module, the environment its clients use, and a client."""

    api: str
    env: dict[str, str]
    process: Process
    client: SyncPrefectClient

    def cli(self, *args: str, timeout: float = 180) -> str:
        """Run `prefect ARGS` from the repository root, as an operator does; its output, or a failure."""
        r = subprocess.run(
            [PREFECT, *args], env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
        output = r.stdout + r.stderr
        assert r.returncode == 0, (
            f"prefect {' '.join(args)} exited {r.returncode}:\n{output}\n{self.process.tail()}"
        )
        return output

    def shell(self, line: str, timeout: float = 180) -> str:
        """Run a shell line of docs/prefect.md from the repository root, with the virtual environment on
        PATH (as the page asks); its output, or a failure."""
        env = self.env | {"PATH": f"{BIN}{os.pathsep}{self.env.get('PATH', '')}"}
        r = subprocess.run(
            ["bash", "-c", line],
            env=env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        output = r.stdout + r.stderr
        assert r.returncode == 0, f"{line}\nexited {r.returncode}:\n{output}\n{self.process.tail()}"
        return output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _code_block(heading: str) -> str:
    """The first ```sh block of docs/prefect.md after ``heading``."""
    text = GUIDE.read_text(encoding="utf-8")
    return text[text.index(heading) :].split("```sh", 1)[1].split("```", 1)[0]


def _clean_env() -> dict[str, str]:
    """This process's environment without Prefect's settings and without a Qdrant server."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != "DOCVEC_QDRANT_URL"}


def _worker_env(tiny_dir: Path, data: Path) -> dict[str, str]:
    return {
        "DOCVEC_DATA_DIR": str(data),
        "DOCVEC_MODEL": str(tiny_dir),
        "DOCVEC_EMBED__MAX_PIXELS": str(SMALL),
    }


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, sources: Path, tiny_dir: Path) -> Path:
    """A PREFECT_HOME where the page's first command ran, as a new user runs it before any server: `python
    flows/ingest.py ~/papers --prune`, whose temporary server keeps its database (with the limits the run
    made) there."""
    home = tmp_path_factory.mktemp("prefect-home")
    first = _code_block("All three run without a server").splitlines()[1]
    args = shlex.split(first, comments=True)
    assert args[:2] == ["python", "flows/ingest.py"], first
    args = [sys.executable, args[1], str(sources), *args[3:]]
    env = _clean_env() | _worker_env(tiny_dir, tmp_path_factory.mktemp("serverless-data"))
    env |= {"PREFECT_HOME": str(home), "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180"}
    r = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=WORKER_S)
    assert r.returncode == 0, r.stdout + r.stderr
    return home


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Server]:
    """`prefect server start` on a free port with ``home`` as PREFECT_HOME, healthy; stopped at the end."""
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = _clean_env() | {
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "INFO",  # the runs' INFO lines are what the tests read back
        # no cron runs of the `scheduled` deployment: the tests start every run themselves
        "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
        # a run that waits for a slot asks again within seconds, not the default 30
        "PREFECT_SERVER_CONCURRENCY_MAXIMUM_CONCURRENCY_SLOT_WAIT_SECONDS": "2",
    }
    process = Process.start(
        "prefect server",
        [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=home,
        log=home / "server.log",
    )
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            assert process.popen.poll() is None, f"the server exited\n{process.tail()}"
            try:
                if httpx.get(f"{api}/health", timeout=5).json() is True:
                    break
            except (httpx.HTTPError, ValueError):
                pass
            assert time.monotonic() < deadline, f"no health after {SERVER_START_S} s\n{process.tail()}"
            time.sleep(0.5)
        with SyncPrefectClient(api) as client:
            yield Server(api, env, process, client)
    finally:
        left = process.stop()
    assert not left, f"processes left after the server stopped: {left}"


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory, documents: Path) -> Path:
    """The folder the scheduled deployment indexes."""
    return copy_documents(documents, tmp_path_factory.mktemp("sources"), PAGES_OF)


def _set_up(sources: Path) -> list[str]:
    """The lines of docs/prefect.md's set-up, ``sources`` for ``$HOME/papers``: all but the exports (the
    server's environment has them), `prefect server start` (the fixture's) and `prefect worker start` (each
    test starts its own, `--run-once`)."""
    lines = []
    for line in _code_block("## Set-up on one machine").splitlines():
        words = shlex.split(line, comments=True)
        if not words or words[0] == "export" or words[:2] in (["prefect", "server"], ["prefect", "worker"]):
            continue
        assert "$" not in line.replace("$HOME/papers", ""), line  # nothing else of the user's shell
        lines.append(line.replace("$HOME/papers", str(sources)))
    return lines


def _raise_embed(server: Server, slots: int) -> None:
    """docs/prefect.md's command that sets docvec-embed for more model instances, with ``slots``."""
    line = _code_block("## More workers on more machines").split("#")[0].strip()
    assert line.count("--limit 8") == 2, line
    server.shell(line.replace("--limit 8", f"--limit {slots}"))


@pytest.fixture(scope="module")
def deployed(server: Server, sources: Path) -> Server:
    """The set-up of docs/prefect.md: the pool, the deployments of prefect.yaml, the sources set by
    deploying again; then docvec-embed raised to 2, as an operator with two model instances would."""
    for line in _set_up(sources):
        server.shell(line)
    _raise_embed(server, 2)
    return server


def test_the_set_up_runs_after_runs_without_a_server_and_again(server: Server, sources: Path) -> None:
    """The page in order: its runs without a server made the limits in PREFECT_HOME's database, which the
    server then uses; the set-up still goes through, twice, and leaves them be."""
    client = server.client
    made = {
        n: client.read_global_concurrency_limit_by_name(n) for n in ("docvec-store-writes", "docvec-embed")
    }
    assert {n: gcl.limit for n, gcl in made.items()} == {"docvec-store-writes": 1, "docvec-embed": 1}
    client.update_global_concurrency_limit(  # as an operator may have raised it before
        "docvec-embed", GlobalConcurrencyLimitUpdate(limit=3)
    )
    for _ in range(2):
        for line in _set_up(sources):
            server.shell(line)
    deployment = client.read_deployment_by_name("docvec-ingest/scheduled")
    assert deployment.work_pool_name == "docvec" and deployment.parameters["paths"] == [str(sources)]
    for name, limit in (("docvec-store-writes", 1), ("docvec-embed", 3)):
        gcl = client.read_global_concurrency_limit_by_name(name)
        assert (gcl.id, gcl.limit) == (made[name].id, limit), name

    # raising docvec-embed, as the page says, on a server where a run made it and on one where none did
    _raise_embed(server, 4)
    assert client.read_global_concurrency_limit_by_name("docvec-embed").limit == 4
    client.delete_global_concurrency_limit_by_name("docvec-embed")
    _raise_embed(server, 5)
    assert client.read_global_concurrency_limit_by_name("docvec-embed").limit == 5


def _worker(server: Server, tmp: Path, tiny_dir: Path, data: Path) -> Process:
    """`prefect worker start --pool docvec --run-once` in a folder of its own: it takes the runs that are due,
    runs them, and exits when they are done."""
    env = server.env | _worker_env(tiny_dir, data)
    cwd = tmp / "worker"
    cwd.mkdir(exist_ok=True)
    args = [PREFECT, "worker", "start", "--pool", "docvec", "--run-once"]
    return Process.start("worker", args, env=env, cwd=cwd, log=tmp / f"worker-{time.monotonic_ns()}.log")


def _finish(worker: Process, server: Server, describe: Callable[[], str]) -> None:
    try:
        worker.popen.wait(timeout=WORKER_S)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"the worker ran over {WORKER_S} s\n{describe()}\n{worker.tail()}\n{server.process.tail()}"
        )
    finally:
        left = worker.stop()
    assert worker.popen.returncode == 0, f"worker exited {worker.popen.returncode}\n{worker.tail()}"
    assert not left, f"processes left after the worker exited: {left}"


def _run_id(output: str) -> UUID:
    found = re.search(r"UUID: ([0-9a-f-]{36})", output)
    assert found, output
    return UUID(found[1])


def _runs(server: Server, ids: list[UUID]) -> list[FlowRun]:
    return [server.client.read_flow_run(i) for i in ids]


def _logs(server: Server, ids: list[UUID]) -> dict[UUID, list[str]]:
    found: dict[UUID, list[str]] = {i: [] for i in ids}
    logs = server.client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids)), limit=200)
    for log in logs:
        if log.flow_run_id is not None:
            found[log.flow_run_id].append(log.message)
    return found


def _describe(server: Server, ids: list[UUID]) -> Callable[[], str]:
    def describe() -> str:
        lines = []
        for run in _runs(server, ids):
            state = run.state
            lines.append(
                f"run {run.name} {run.id}: {state.type if state else None} {state and state.message}"
            )
            lines += [f"  | {m}" for m in _logs(server, [run.id])[run.id]]
        return "\n".join(lines)

    return describe


def test_scheduled_ingest_then_batch_query(
    deployed: Server, sources: Path, tiny_dir: Path, tmp_path: Path
) -> None:
    server = deployed
    config = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    wanted = next(d for d in config["deployments"] if d["name"] == "scheduled")["schedules"]
    schedules = server.client.read_deployment_by_name("docvec-ingest/scheduled").schedules
    assert [getattr(s.schedule, "cron", None) for s in schedules] == [w["cron"] for w in wanted]

    # a run of the scheduled deployment as it is (its sources were set at deploy time)
    ingest = _run_id(server.cli("deployment", "run", "docvec-ingest/scheduled"))
    data = tmp_path / "data"
    _finish(_worker(server, tmp_path, tiny_dir, data), server, _describe(server, [ingest]))
    run = server.client.read_flow_run(ingest)
    assert run.parameters["paths"] == [str(sources)]
    assert run.state and run.state.type == StateType.COMPLETED, _describe(server, [ingest])()
    assert run.state.message == (
        f"indexed {len(PAGES_OF)} documents ({PAGES} pages); skipped 0 unchanged (0 pages); "
        "failed 0 documents, 0 pages"
    )
    # the limits are as the operator made them: a run takes slots, never resizes a limit, and gives them back
    for name, limit in (("docvec-store-writes", 1), ("docvec-embed", 2)):
        gcl = server.client.read_global_concurrency_limit_by_name(name)
        assert (gcl.limit, gcl.active_slots) == (limit, 0), name

    # the pages are searchable, through the batch-query deployment
    queries, out = tmp_path / "queries.txt", tmp_path / "hits.jsonl"
    queries.write_text('total amount due\n{"query": "a smiling face", "k": 2}\n')
    query = _run_id(
        server.cli(
            "deployment",
            "run",
            "docvec-query/batch",
            "--param",
            f"queries={queries}",
            "--param",
            f"out={out}",
            "--param",
            "with_text=true",
        )
    )
    _finish(_worker(server, tmp_path, tiny_dir, data), server, _describe(server, [query]))
    run = server.client.read_flow_run(query)
    assert run.state and run.state.type == StateType.COMPLETED, _describe(server, [query])()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["query"], r["k"], len(r["hits"])) for r in rows] == [
        ("total amount due", 5, 5),
        ("a smiling face", 2, 2),
    ]
    assert {Path(h["source"]).name for r in rows for h in r["hits"]} <= set(PAGES_OF)
    # with_text, as a RAG pipeline asks: the PDF pages come with their text layer's words
    pdf_texts = [h["text"] for h in rows[0]["hits"] if h["source"].endswith(".pdf")]
    assert len(pdf_texts) >= 4 and all(t and len(t.split()) > 20 for t in pdf_texts), pdf_texts

    # and the collection is rebuilt at another page budget by the reindex deployment
    budget = 28 * 28 * 32
    reindex = _run_id(
        server.cli(
            "deployment", "run", "docvec-reindex/manual", "--param", f'spec={{"max_pixels": {budget}}}'
        )
    )
    _finish(_worker(server, tmp_path, tiny_dir, data), server, _describe(server, [reindex]))
    run = server.client.read_flow_run(reindex)
    assert run.state and run.state.type == StateType.COMPLETED, _describe(server, [reindex])()
    assert run.state.message and run.state.message.startswith("collection 'docvec' now reads docvec.v2")
    with Index.open(data, model=str(tiny_dir)) as index:
        live = [v for v in index.versions() if v.live]
        assert [(v.version, v.max_pixels, v.pages) for v in live] == [("docvec.v2", budget, PAGES)]


def test_overlapping_runs_wait_for_the_store_and_index_once(
    deployed: Server, tiny_dir: Path, tmp_path: Path
) -> None:
    server = deployed
    client = server.client
    data = tmp_path / "data"
    # Someone else holds the store's slot (as a long run would) while two runs are submitted at once:
    # both must wait for it, neither may open the store meanwhile, and neither may fail.
    lease = client.increment_concurrency_slots_with_lease(
        names=["docvec-store-writes"], slots=1, mode="concurrency", lease_duration=600
    ).json()["lease_id"]
    released = False
    try:
        deployment = client.read_deployment_by_name("docvec-ingest/scheduled")
        ids = [client.create_flow_run_from_deployment(deployment.id).id for _ in range(2)]
        describe = _describe(server, ids)
        worker = _worker(server, tmp_path, tiny_dir, data)
        try:
            deadline = time.monotonic() + WORKER_S
            while not all(WAITING in logs for logs in _logs(server, ids).values()):
                assert worker.popen.poll() is None, f"the worker exited early\n{describe()}\n{worker.tail()}"
                assert time.monotonic() < deadline, f"the runs did not wait\n{describe()}\n{worker.tail()}"
                time.sleep(1)
            time.sleep(3)  # still waiting, not failed, and the store untouched
            assert all(run.state and run.state.type == StateType.RUNNING for run in _runs(server, ids)), (
                describe()
            )
            assert not (data / "qdrant").exists()
            client.release_concurrency_slots_with_lease(UUID(lease))
            released = True
            _finish(worker, server, describe)
        finally:
            worker.stop()
    finally:
        if not released:
            client.release_concurrency_slots_with_lease(UUID(lease))

    runs = _runs(server, ids)
    assert all(run.state and run.state.type == StateType.COMPLETED for run in runs), describe()
    # One after the other: the first indexed everything, the second found it all there and embedded nothing.
    # (Side by side, the second would have failed: the embedded store refuses a second owner.)
    messages = sorted(run.state.message or "" for run in runs if run.state)
    assert messages == [
        f"indexed 0 documents (0 pages); skipped {len(PAGES_OF)} unchanged ({PAGES} pages); "
        "failed 0 documents, 0 pages",
        f"indexed {len(PAGES_OF)} documents ({PAGES} pages); skipped 0 unchanged (0 pages); "
        "failed 0 documents, 0 pages",
    ], describe()
    assert all(any(m.startswith("took a slot of") for m in logs) for logs in _logs(server, ids).values())
    for name in ("docvec-store-writes", "docvec-embed"):
        assert client.read_global_concurrency_limit_by_name(name).active_slots == 0, name

    with Index.open(Settings(data_dir=data, qdrant_url=None), create=False) as index:
        assert index.count() == PAGES
        listed = index.documents().documents
        assert sorted(d.name for d in listed) == sorted(PAGES_OF)
        for doc in listed:
            pages = [p.page for p in index.pages_of(doc.doc_id)]
            assert pages == list(range(1, PAGES_OF[doc.name] + 1)), doc.name


def _records(server: Server, run_id: UUID) -> list[Log]:
    logs = server.client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])), limit=200)
    return sorted(logs, key=lambda log: log.timestamp)


def test_failed_runs_log_why_in_one_line_not_a_traceback(
    deployed: Server, tiny_dir: Path, tmp_path: Path
) -> None:
    """A scheduled run failed by a bad file, and a batch of queries with a bad line, under a worker: each run
    is Failed, its message says which file and why, and its log has that as one ERROR line, without the
    traceback of a crash."""
    server = deployed
    bad = tmp_path / "bad"
    bad.mkdir()
    broken = bad / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7 not really\n")
    paths = json.dumps([str(bad)])
    ingest = _run_id(server.cli("deployment", "run", "docvec-ingest/scheduled", "--param", f"paths={paths}"))
    queries = tmp_path / "queries.txt"
    queries.write_text('total amount due\n{"query": "a smiling face", "k": 0}\n')
    query = _run_id(
        server.cli(
            "deployment",
            "run",
            "docvec-query/batch",
            "--param",
            f"queries={queries}",
            "--param",
            "out=/dev/null",
        )
    )
    worker = _worker(server, tmp_path, tiny_dir, tmp_path / "data")
    _finish(worker, server, _describe(server, [ingest, query]))
    describe = _describe(server, [ingest, query])
    everything = describe() + worker.log.read_text(errors="replace")
    for sign in ("Traceback", "unexpected exception", "TypeError", "rash"):
        assert sign not in everything, f"{sign!r} in the logs\n{everything[-6000:]}"

    run = server.client.read_flow_run(ingest)
    assert run.state and run.state.type == StateType.FAILED, describe()
    message = run.state.message or ""
    assert message.startswith(f"1 failure (max_failures=0): {broken}: ") and "\n" not in message, message
    records = _records(server, ingest)
    assert [r.message for r in records if r.level >= logging.ERROR] == [message], describe()
    assert f"failed: {message.split(': ', 1)[1]}" in [
        r.message for r in records if r.level == logging.WARNING
    ]

    run = server.client.read_flow_run(query)
    assert run.state and run.state.type == StateType.FAILED, describe()
    why = f"InputError: {queries}: line 2: k must be"
    assert why in (run.state.message or ""), describe()
    errors = [r.message for r in _records(server, query) if r.level >= logging.ERROR]
    assert len([m for m in errors if m.startswith(why)]) == 1, describe()
