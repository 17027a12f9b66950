"""A command that holds the embedded store answers other processes' searches while it works.

The embedded store has one owner. ``docvec serve`` lends it to every docvec process on the machine; a long
command (an ingest, a reindex) would otherwise keep every search from another shell waiting for its end.
:func:`answering_reads` runs the API beside the command, on a loopback port, answering reads only
(:class:`docvec.api._reads.ReadsOnly`), and says so in the store's owner record, so that a search started
meanwhile is sent there (:func:`docvec.connect`) and a write waits as before. The search runs in this
process, on the collection's live version, while the command writes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator

from .._config import Settings
from .._contract import IndexLike
from .._index import Index

__all__ = ["answering_reads"]

log = logging.getLogger("docvec")

#: the most seconds the server may take to start; a command goes on without it after that
_START_S = 10.0
#: at the command's end, the most seconds a search under way is given to finish
_GRACEFUL_S = 5


@contextlib.contextmanager
def answering_reads(index: IndexLike, settings: Settings, *, command: str) -> Iterator[None]:
    """While the block runs, answer other processes' searches and reads of ``index`` (an embedded store
    this process opened; anything else, a server's store or another process's server, needs nothing);
    ``command``, the docvec command that runs, is what a refused write is told waits (its name only: its
    arguments may name the user's files)."""
    if not isinstance(index, Index) or settings.qdrant_url:
        yield
        return
    import uvicorn

    from ..api import create_app

    holder = f"process {os.getpid()} (docvec {command})"
    app = create_app(settings, index=index, reads_only=holder)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_config=None,  # the command's own logging stays as it is
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            timeout_graceful_shutdown=_GRACEFUL_S,
        )
    )
    # not the main thread: uvicorn leaves the signals (Ctrl-C) to the command
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="docvec-reads", daemon=True)
    thread.start()
    deadline = time.monotonic() + _START_S
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if server.started:
        index.advertise(f"http://127.0.0.1:{port}", token=app.state.access.owner_token, reads_only=True)
    else:
        log.warning("searches from other processes wait for this command: its server did not start")
    try:
        yield
    finally:
        if server.started:
            # new callers wait for the store from now on; searches under way get their answers
            with contextlib.suppress(Exception):
                index.withdraw()
        server.should_exit = True
        thread.join(_GRACEFUL_S + 5)
        sock.close()
