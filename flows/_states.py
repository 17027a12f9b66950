"""How a flow ends Failed with its report. Prefect resolves a failed state's data into an exception (a
worker's engine raises it once the run is over): a report as the data is a ``TypeError`` there, logged as an
engine error on every failed run. The data is a :class:`RunFailed` instead, which carries the report."""

from __future__ import annotations

from typing import Any

from prefect.states import Failed, State


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
