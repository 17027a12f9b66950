"""How ``docvec ingest`` shows where it stands: a bar on a terminal; elsewhere (cron, CI, a Prefect
worker) one line every so many seconds, so that an unattended run's log says it is alive and how far."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from .._pipeline._ingest import IngestProgress
from .._records import IngestReport, counted

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
        # the pages of the documents finished so far, as this display saw them go by: all that a server's
        # job tells a client (its records carry no report)
        self._seen_pages = 0
        self._doc: tuple[int, str | None] = (0, None)
        self._doc_pages = 0
        self._last_progress: IngestProgress | None = None

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
        self._last_progress = p
        self._track(p)
        if self._task is not None and p.current:
            name = p.current.rsplit("/", 1)[-1][:40]
            self._bar.update(self._task, description=name, completed=p.page, total=p.page_count or None)
        now = time.monotonic()
        if self._lines and (now - self._last >= self.every or p.documents_done == p.documents_total):
            self._last = now
            self.console.print(self.line(p, now - self._start), highlight=False, soft_wrap=True)

    def _track(self, p: IngestProgress) -> None:
        doc = (p.documents_done, p.current)
        if doc != self._doc:  # the document before is finished
            self._seen_pages += self._doc_pages
            self._doc, self._doc_pages = doc, 0
        if p.current is not None:
            self._doc_pages = p.page_count

    def kept(self) -> str:
        """What a run stopped here (Ctrl-C) kept, in words: the documents it finished, and the pages of the
        one it was in, which the ingest writes before it stops (the next run goes on after them)."""
        r = self.report
        text = f"{counted(r.documents_indexed, 'document')} ({counted(r.pages_indexed, 'page')}) indexed"
        p = self._last_progress
        if p is not None and p.current is not None and p.page:
            name = p.current.rsplit("/", 1)[-1]
            text += (
                f", and {name}'s pages 1-{p.page} of {p.page_count}"
                if p.page > 1
                else f", and page 1 of {name}"
            )
        return text + " are kept"

    def line(self, p: IngestProgress, elapsed: float) -> str:
        """``progress: 3/10 documents, 41 pages, 1.20 pages/s, ETA 2m10s``.

        The ETA weighs pages, not documents (one of 40 pages takes 40 times one of 1): the pages still to
        read of those known (the current document's), at the rate so far, and for each document not yet
        opened the mean of those read so far (a skipped or failed one counts as none).
        """
        r = p.report
        reported = r.documents_indexed + r.documents_skipped + r.documents_failed + r.pages_indexed
        finished = r.pages_indexed + r.pages_failed if reported else self._seen_pages
        pages = finished + p.page
        rate = pages / elapsed if elapsed > 0 else 0.0
        opened = p.documents_done + (1 if p.page_count else 0)
        known = finished + p.page_count
        unopened = max(p.documents_total - opened, 0)
        left = p.page_count - p.page + (unopened * known / opened if opened else 0)
        eta = f", ETA {format_duration(left / rate)}" if rate > 0 and left > 0 else ""
        done = f"{p.documents_done}/{p.documents_total} documents"
        return f"progress: {done}, {pages} pages, {rate:.2f} pages/s{eta}"
