"""How ``docvec ingest`` shows where it stands: a bar on a terminal; elsewhere (cron, CI, a Prefect
worker) one line every so many seconds, so that an unattended run's log says it is alive and how far."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from .._pipeline._ingest import IngestProgress
from .._records import IngestReport

__all__ = ["IngestDisplay", "format_duration"]


def format_duration(seconds: float) -> str:
    """``2h05m``, ``4m10s`` or ``9s``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class IngestDisplay:
    """Takes an ingest run's progress reports; keeps the last one (what was committed, if interrupted)."""

    def __init__(self, console: Console, *, quiet: bool = False, every: float = 30.0) -> None:
        self.console = console
        self.every = every
        self.report = IngestReport()
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=quiet or not console.is_terminal,
        )
        self._lines = not quiet and not console.is_terminal
        self._task: TaskID | None = None
        self._start = self._last = time.monotonic()

    def __enter__(self) -> Self:
        self._bar.__enter__()
        self._task = self._bar.add_task("pages", total=None)
        self._start = self._last = time.monotonic()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._bar.__exit__(exc_type, exc, tb)

    def __call__(self, p: IngestProgress) -> None:
        self.report = p.report
        if self._task is not None and p.current:
            name = p.current.rsplit("/", 1)[-1][:40]
            self._bar.update(self._task, description=name, completed=p.page, total=p.page_count or None)
        now = time.monotonic()
        if self._lines and (now - self._last >= self.every or p.documents_done == p.documents_total):
            self._last = now
            self.console.print(self.line(p, now - self._start), highlight=False, soft_wrap=True)

    @staticmethod
    def line(p: IngestProgress, elapsed: float) -> str:
        """``progress: 3/10 documents, 41 pages, 1.20 pages/s, ETA 2m10s``."""
        pages = p.report.pages_indexed + p.report.pages_failed + p.page
        rate = pages / elapsed if elapsed > 0 else 0.0
        # the share of the run done, counting the current document by its pages
        share = (p.documents_done + (p.page / p.page_count if p.page_count else 0)) / max(
            p.documents_total, 1
        )
        eta = f", ETA {format_duration(elapsed * (1 - share) / share)}" if 0 < share < 1 else ""
        done = f"{p.documents_done}/{p.documents_total} documents"
        return f"progress: {done}, {pages} pages, {rate:.2f} pages/s{eta}"
