"""Prefect flow for scheduled ingestion: a thin loop over docvec's library, no logic of its own.

Run once, with no Prefect server (an ephemeral one starts in-process):

    python flows/ingest.py ~/papers ~/scans --prune

Serve it on a schedule (needs a Prefect server: `prefect server start`, PREFECT_API_URL set):

    python flows/ingest.py ~/papers --prune --cron "0 * * * *"

or deploy it with prefect.yaml (`docvec-ingest/scheduled`) for a worker to run (docs/prefect.md).

The run logs its summary and each failure (as a warning), returns the report as its result, and ends
Failed when more documents or pages failed than ``max_failures`` (default 0), so that an operator sees it
in the Prefect UI; its result is the report all the same.

Settings (model, data folder, Qdrant URL, ...) come from DOCVEC_* variables as for the CLI. The embedded
store has one owner: while `docvec serve` holds it, the flow sends its work to the server; while this flow
holds it, a `docvec ingest` waits its turn (DOCVEC_STORE_WAIT_S) and `docvec serve` refuses to start. Runs
of the flows that overlap wait for each other on Prefect global concurrency limits (flows/_limits.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

# the flows' own modules: this file's folder is on sys.path when it runs as a script and when Prefect loads
# it as a deployment's entrypoint
import _offline  # noqa: F401  (before prefect: telemetry off)
from _limits import hold_slots
from _states import failed, failures_line, report_of
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, State

from docvec import IndexLike, IngestReport, Settings, StoreUnavailableError, connect, discover


def _store_unavailable(task: object, task_run: object, state: object) -> bool:
    # retry only what retrying can fix: a Qdrant server that did not answer, never a bad document
    try:
        state.result()  # type: ignore[attr-defined]
    except StoreUnavailableError:
        return True
    except Exception:
        return False
    return False


@task(cache_policy=NO_CACHE)
def find_documents(paths: list[str], recursive: bool) -> tuple[list[Path], IngestReport]:
    """Discover the files to ingest; the report starts with what matched nothing and what is ignored."""
    found = discover(paths, recursive=recursive)
    ignored = [str(p) for p in found.ignored]
    return found.files, IngestReport(
        documents_failed=len(found.failures), failures=found.failures, ignored=ignored
    )


# Live handles (the index) are task inputs, so nothing is cached; store writes are retried.
_WRITES = {"cache_policy": NO_CACHE, "retries": 3, "retry_delay_seconds": [5, 30, 120]}


@task(**_WRITES, retry_condition_fn=_store_unavailable)  # type: ignore[call-overload]
def ingest_document(index: IndexLike, path: Path, tags: list[str]) -> IngestReport:
    """Render, embed and store one document (skipped when unchanged)."""
    return index.add([path], tags=tags)


@task(**_WRITES, retry_condition_fn=_store_unavailable)  # type: ignore[call-overload]
def prune_documents(index: IndexLike) -> int:
    """Remove documents whose files are gone."""
    return index.prune()


@flow(name="docvec-ingest")
def ingest_flow(
    paths: list[str],
    recursive: bool = True,
    prune: bool = False,
    tags: list[str] | None = None,
    max_failures: int = 0,
) -> State:
    """Index documents under ``paths`` into docvec's store, as `docvec ingest` does; Failed when more than
    ``max_failures`` documents or pages failed."""
    logger = get_run_logger()
    files, total = find_documents(paths, recursive)
    # overlapping runs wait here for their turn (flows/_limits.py)
    settings = Settings()
    with hold_slots(settings), connect(settings, notify=logger.info) as index:
        for path in files:
            total += ingest_document(index, path, tags or [])
        if prune:
            total.documents_removed += prune_documents(index)
    logger.info(total.summary())
    for failure in total.failures:
        logger.warning(f"failed: {failure}")
    if len(total.failures) > max_failures:
        return failed(failures_line(total.failures, f" (max_failures={max_failures})"), total)
    return Completed(message=total.summary(), data=total)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="docvec ingestion flow")
    ap.add_argument("paths", nargs="+", help="files, folders (read recursively) and glob patterns")
    ap.add_argument("--no-recursive", action="store_true", help="read only the top of each folder")
    ap.add_argument("--prune", action="store_true", help="also drop the documents whose files are gone")
    ap.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="stored with every page (repeatable); without --tag a document keeps its tags",
    )
    ap.add_argument("--max-failures", type=int, default=0, help="failures a run may have and still succeed")
    ap.add_argument("--cron", help="serve the flow on this schedule (needs a Prefect server)")
    args = ap.parse_args()
    params = {
        "paths": args.paths,
        "recursive": not args.no_recursive,
        "prune": args.prune,
        "tags": args.tag,
        "max_failures": args.max_failures,
    }
    if args.cron:
        ingest_flow.serve(name="docvec-ingest-scheduled", cron=args.cron, parameters=params)
    else:
        state = ingest_flow(**params, return_state=True)
        print(report_of(state).model_dump_json(indent=2))
        raise SystemExit(0 if state.is_completed() else 1)
