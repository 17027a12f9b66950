"""A check that the test suite reads nothing outside the repository, the temporary folders and what
``make setup`` installs: a user's fresh clone has nothing else (no folders beside it, no data of theirs).

A Python audit hook sees every file the test process opens or lists (``open``, ``os.listdir``,
``os.scandir``, ``glob``); any path outside the allowed places is recorded with the test that touched it,
and the session fails at the end with the list. Processes the tests start (render workers, the converter)
are not watched, but every document path reaches them through a parent that opened it first.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
import tempfile
from pathlib import Path

__all__ = ["Isolation"]

# The operating system and its devices: libraries, certificates, locale data, /proc for RSS readings.
_SYSTEM = ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev", "/run", "/opt")
_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "glob.glob", "os.mkdir"})


class Isolation:
    """Records what the process reads outside ``allowed``; one per session (audit hooks stay for good)."""

    def __init__(self, root: Path, *, extra: tuple[Path, ...] = ()) -> None:
        places = [
            root,
            Path(tempfile.gettempdir()),
            Path(sys.prefix),
            Path(sys.base_prefix),
            Path(sys.exec_prefix),
            *(Path(p) for p in site.getsitepackages()),
            *(Path(p) for p in sysconfig.get_paths().values()),
            *extra,
            *(Path(p) for p in _SYSTEM),
        ]
        self.allowed = tuple(sorted({os.path.realpath(p).rstrip(os.sep) + os.sep for p in places}))
        self.violations: dict[str, str] = {}  # path -> the test that read it
        self.current = "collection"
        self._active = False

    def install(self) -> None:
        """Start watching (once per process: an audit hook cannot be removed, only switched off)."""
        self._active = True
        sys.addaudithook(self._hook)

    def stop(self) -> None:
        self._active = False

    def allows(self, path: str) -> bool:
        """Whether reading ``path`` (absolute or relative to the working folder) is within bounds."""
        real = os.path.realpath(path)
        return any((real + os.sep).startswith(place) for place in self.allowed)

    def _hook(self, event: str, args: tuple[object, ...]) -> None:
        if not self._active or event not in _EVENTS or not args:
            return
        path = args[0]
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, str) or not path:  # a file descriptor, or the working folder
            return
        self._active = False  # realpath below must not call back into this hook
        try:
            if not self.allows(path):
                self.violations.setdefault(os.path.abspath(path), self.current)
        finally:
            self._active = True

    def report(self) -> list[str]:
        """One line per path read out of bounds, with the test that read it first."""
        return [f"{path}  (read by {test})" for path, test in sorted(self.violations.items())]
