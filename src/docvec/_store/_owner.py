"""The embedded store folder's one owner: an exclusive lock on ``<folder>/.lock`` (filelock's: flock on
Unix) and a record of who holds it in ``<folder>/.owner.json`` (pid, hostname, start time, command line,
and where a server serves it).

The lock keeps a second process out; the record tells that process who is in its way (and a server's
URL, so that docvec commands send their work there instead of failing).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from .._errors import StoreBusyError, StoreError
from .._fileio import write_json_atomic

__all__ = ["TOKEN_FIELD", "OwnerLock", "read_owner", "read_owner_token"]

log = logging.getLogger("docvec")

_LOCK_FILE = ".lock"
_OWNER_FILE = ".owner.json"
#: the owner record's field a server keeps its owner token in: the record is readable by the folder
#: owner's user only (written 0600), so whoever reads the token may read the whole store anyway
TOKEN_FIELD = "token"
_BUSY_ADVICE = (
    "An embedded store can be open in one process at a time: stop it, or send the work to it through "
    "its API (`docvec serve`), or use a Qdrant server (DOCVEC_QDRANT_URL)."
)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((Path(path) / _OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_owner(path: Path) -> dict[str, Any] | None:
    """What the process holding the store at ``path`` recorded about itself (its token left out: errors
    and logs carry this), or ``None``."""
    data = _read(path)
    return None if data is None else {k: v for k, v in data.items() if k != TOKEN_FIELD}


def read_owner_token(path: Path) -> str | None:
    """The token a server holding the store at ``path`` takes from its own user's docvec commands, or
    ``None`` (no server, or a record this user may not read)."""
    token = (_read(path) or {}).get(TOKEN_FIELD)
    return token if isinstance(token, str) and token else None


class OwnerLock:
    """The lock on a store folder and its owner record; taken by :meth:`acquire`, let go by
    :meth:`release` (the record goes with it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # One lock object per store: a second store on the folder in this process is refused like another
        # process. Non-blocking: waiting for another process's store to close would hang a CLI for ever.
        # Not per thread: a server takes it in one thread and may let it go in another.
        self._lock = FileLock(path / _LOCK_FILE, mode=0o644, thread_local=False, blocking=False)

    @property
    def held(self) -> bool:
        """Whether this process holds the folder."""
        return self._lock.is_locked

    def acquire(self) -> None:
        """Create the folder if needed, take its lock and say who holds it (once); a folder another
        process holds is a :class:`~docvec.StoreBusyError` naming that process."""
        if self.held:
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store folder {self.path}: {exc}") from exc
        try:
            self._lock.acquire()
        except Timeout:
            raise self.busy_error() from None
        except OSError as exc:
            raise StoreError(f"cannot lock {self.path / _LOCK_FILE}: {exc}") from exc
        self._write()

    def advertise(self, fields: dict[str, Any]) -> None:
        """Set what the owner record says beside who holds the store to ``fields`` (a server says where it
        listens, so that other docvec processes send it their work instead of waiting; none: take it back)."""
        self.acquire()
        self._write(fields)

    def release(self) -> None:
        """Remove the owner record and let the lock go (call it after everything under it is closed)."""
        if not self.held:
            return
        with contextlib.suppress(OSError):
            (self.path / _OWNER_FILE).unlink()
        self._lock.release(force=True)

    def busy_error(self) -> StoreBusyError:
        """The error for a folder another process (or another handle in this one) holds."""
        owner = read_owner(self.path)
        if owner is None:
            who = f"another process (it left no readable {_OWNER_FILE})"
        else:
            cmd = str(owner.get("cmdline", "?"))
            if len(cmd) > 200:
                cmd = cmd[:197] + "..."
            who = f"process {owner.get('pid', '?')} on {owner.get('hostname', '?')}"
            if owner.get("pid") == os.getpid() and owner.get("hostname") == socket.gethostname():
                who += " (this process: another store on this folder is still open)"
            who += f", running since {owner.get('started', '?')}: {cmd}"
        served = owner.get("api") if owner else None
        # a server tells where it listens: the work goes there (docvec's commands do that by themselves)
        advice = (
            f"It is `docvec serve` at {served}: send the work to {served} (its API; the docvec commands on "
            "this machine do so by themselves), or stop it first."
            if served
            else _BUSY_ADVICE
        )
        return StoreBusyError(
            f"the docvec store at {self.path} is in use by {who}. {advice}",
            path=str(self.path),
            owner=owner,
        )

    def _write(self, extra: dict[str, Any] | None = None) -> None:
        owner = {
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "cmdline": shlex.join(sys.orig_argv),
            **(extra or {}),
        }
        try:
            write_json_atomic(self.path / _OWNER_FILE, owner, durable=True)
        except OSError as exc:
            # The lock is what keeps a second process out; the record only names the owner. A full disk
            # must not stop a search, so this is a warning.
            log.warning(
                "cannot write %s (%s): a second process will not be told who holds the store",
                self.path / _OWNER_FILE,
                exc.strerror or exc,
            )
