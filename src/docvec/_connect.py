"""Opening the index from anywhere on a machine: :func:`connect`, which the command line and the flows use.

The embedded store has one owner. When ``docvec serve`` owns it, every other docvec process sends its
work to that server (it recorded where it listens in the store's owner record); when a command owns it
(an ingest, a reindex), it answers other processes' searches and reads the same way, and a process that
would write waits for its turn, up to ``DOCVEC_STORE_WAIT_S``, and says so.
With a Qdrant server nothing waits: every process uses it directly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._client import RemoteIndex
from ._config import Settings, settings_for
from ._contract import IndexLike
from ._errors import StoreBusyError
from ._index import Index
from ._store import read_owner_token

__all__ = ["connect"]

log = logging.getLogger("docvec")

_RETRY_S = 0.5


def connect(
    where: Settings | str | Path | None = None,
    *,
    create: bool = True,
    wait: float | None = None,
    notify: Callable[[str], None] | None = None,
    reads_only: bool = False,
    **overrides: Any,
) -> IndexLike:
    """The index ``where`` names (as :meth:`Index.open` takes it), or, when a running ``docvec serve``
    holds its embedded store, a :class:`~docvec._client.RemoteIndex` that sends the work there.

    A command that holds the store (an ingest, a reindex) answers searches and reads meanwhile: a caller
    that will only read (``reads_only``) is sent there too; one that writes waits for the command's end.

    While another process holds the store, this waits up to ``wait`` seconds (default:
    ``settings.store_wait_s``) for it, then raises :class:`~docvec.StoreBusyError`. ``notify`` hears,
    once, what happens (forwarding, or waiting); default: the log.
    """
    settings = settings_for(where, **overrides)
    say = notify or log.warning
    limit = settings.store_wait_s if wait is None else wait
    deadline = time.monotonic() + limit
    told = False
    while True:
        try:
            return Index(settings, create=create)
        except StoreBusyError as e:
            owner = e.owner or {}
            api = owner.get("api")
            answers = reads_only or not owner.get("reads_only")
            if isinstance(api, str) and api and answers:
                server = "the docvec server" if not owner.get("reads_only") else "the docvec command"
                say(f"{server} (process {owner.get('pid', '?')}) holds {e.path}: sending this to {api}")
                # the server's token, where this user may read it: the server takes this process for its
                # owner's (any path it names), as it would be without the server
                return RemoteIndex(api, settings, token=read_owner_token(Path(e.path)) if e.path else None)
            if time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"{e} (waited {limit:.0f} s for it: DOCVEC_STORE_WAIT_S)", path=e.path, owner=e.owner
                ) from None
            if not told:
                who = f"process {owner.get('pid', '?')} ({owner.get('cmdline', 'another docvec process')})"
                say(f"waiting for {who} to release {e.path} (up to {limit:.0f} s; DOCVEC_STORE_WAIT_S)")
                told = True
            time.sleep(_RETRY_S)
