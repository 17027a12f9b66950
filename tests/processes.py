"""Running docvec as a user does, in processes of its own: a command, and `docvec serve` until stopped; and
the API app served on a real socket from a thread of the test's own process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

from docvec import Settings
from docvec.api import create_app

DOCVEC = str(Path(sys.executable).with_name("docvec"))


def docvec(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``docvec ARGS`` in this environment plus ``env``; what it printed and its exit code."""
    return subprocess.run(
        [DOCVEC, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout
    )


def free_port() -> int:
    """A local TCP port nobody listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    """A running ``docvec serve``: its URL, process and the file its stderr goes to."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, n: int = 4000) -> str:
        """The end of what the server printed."""
        return self.log.read_text(errors="replace")[-n:]


@contextmanager
def served(env: dict[str, str], log: Path, *, start_s: float = 120) -> Iterator[Served]:
    """``docvec serve`` on a free port with this environment, once it answers /healthz; stopped (Ctrl-C)
    at the end."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [DOCVEC, "serve", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
        )
    server = Served(f"http://127.0.0.1:{port}", proc, log)
    try:
        deadline = time.monotonic() + start_s
        while True:
            assert proc.poll() is None, f"docvec serve exited {proc.returncode}\n{server.tail()}"
            assert time.monotonic() < deadline, f"docvec serve did not start\n{server.tail()}"
            try:
                if httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield server
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def serve_in_thread(settings: Settings, *, start_s: float = 120) -> Iterator[str]:
    """The API app for ``settings`` on a free port, uvicorn in a thread of this process, once it has
    started; its URL (``http://127.0.0.1:PORT/``). Stopped, its lifespan ended, at the end."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_s
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "the server did not stop"


def docvec_after(
    preamble: str, *args: str, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``docvec ARGS`` in a Python that first runs ``preamble`` (which may replace a method by one that
    kills the process with SIGKILL: a crash at that exact moment, as a power cut would make it)."""
    code = f"import os, signal, sys\n{preamble}\nfrom docvec._cli import app\napp(sys.argv[1:])\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=timeout,
    )
