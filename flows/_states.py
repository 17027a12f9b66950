"""How a flow ends Failed with its report, and how a failure reads in the run's log.

Prefect resolves a failed state's data into an exception (a worker's engine raises it once the run is over):
a report as the data is a ``TypeError`` there, logged as an engine error on every failed run. The data is a
:class:`RunFailed` instead, which carries the report.

Prefect logs every exception a run raises with its traceback, a failed run's own result too (under a worker:
"Engine execution exited with unexpected exception", then ~40 lines of Prefect's frames). For a run that
failed as docvec says it may (a bad document, a bad query line, a busy store: a :class:`docvec.DocvecError`
or a :class:`RunFailed`) that reads as a crash and buries the reason, so the flows' modules install
:class:`OneLine` on the run loggers: such an error is logged once, as its own one line. Anything else is a
crash and keeps its traceback.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import Any

from prefect.states import Failed, State

from docvec import DocvecError

#: Prefect's loggers of flow runs and task runs (what the UI and `prefect flow-run logs` show)
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


class RunFailed(Exception):
    """A run that ended Failed; ``report`` is what it did (an ingest or a reindex report)."""

    def __init__(self, message: str, report: Any) -> None:
        super().__init__(message)
        self.report = report

    def __reduce__(self) -> tuple[Any, ...]:
        return (RunFailed, (str(self), self.report))


def failed(message: str, report: Any) -> State:
    """The Failed state of a run that did ``report``."""
    return Failed(message=message, data=RunFailed(message, report))


def report_of(state: State) -> Any:
    """A finished run's report, whether it completed or failed."""
    result = state.result(raise_on_failure=False)
    return result.report if isinstance(result, RunFailed) else result


def failures_line(failures: Sequence[object], note: str = "") -> str:
    """A run's failures in a Failed state's message: how many (then ``note``), the first (its file and why),
    and that the log has the rest: the UI's list of runs shows this message, not the log."""
    count = f"{len(failures)} failure{'s' if len(failures) != 1 else ''}{note}"
    if not failures:  # a negative max_failures fails a run without any
        return count
    more = f" (and {len(failures) - 1} more, each in the run's log)" if len(failures) > 1 else ""
    return f"{count}: {failures[0]}{more}"


class OneLine(logging.Filter):
    """Logs an expected failure (a :class:`docvec.DocvecError`, a :class:`RunFailed`) as its own message
    without a traceback, once: Prefect logs one exception again at each level it passes (the task, the flow,
    the engine), and the first says it all. A record of any other exception passes as it is."""

    def __init__(self) -> None:
        super().__init__()
        # the exceptions logged already; weak: a process that runs many flows must not keep them alive
        self._seen: weakref.WeakSet[BaseException] = weakref.WeakSet()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, DocvecError | RunFailed):
            return True
        if error in self._seen:
            return False
        self._seen.add(error)
        # a RunFailed's message is the run's Failed state's; a docvec error's is read with its kind
        record.msg = str(error) if isinstance(error, RunFailed) else f"{type(error).__name__}: {error}"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


ONE_LINE = OneLine()
for _name in RUN_LOGGERS:
    logging.getLogger(_name).addFilter(ONE_LINE)  # a second import adds nothing: the same filter
