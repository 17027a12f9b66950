"""Prefect flow for batch reindexing: `docvec reindex` as a flow, a thin call of docvec's library.

    python flows/reindex.py --dim 512 [--model M] [--max-pixels N] [--multivector | --single-vector]
                            [--token-pool N] [--text | --no-text] [--drop-old] [--allow-loss]

or deploy it with prefect.yaml (`docvec-reindex/manual`) and run it on demand:

    prefect deployment run docvec-reindex/manual --param spec='{"dim": 512}'

It builds a new version of the collection (DOCVEC_COLLECTION) from what the index holds and switches to
it once complete; searches read the old version meanwhile. A run that fails or is cancelled leaves the
old version live, and the next run with the same parameters goes on where it stopped. While `docvec
serve` holds the embedded store, the server does the work (and swaps to the new version without a
restart). The run ends Failed when pages could not be carried over (its result is the report all the
same); a new version that lacks pages the live one has is not switched to unless the spec allows the
loss (``allow_loss``).
"""

from __future__ import annotations

import argparse

# the flows' own modules: this file's folder is on sys.path when it runs as a script and when Prefect loads
# it as a deployment's entrypoint
import _offline  # noqa: F401  (before prefect: telemetry off)
from _limits import hold_slots
from _states import failed, failures_line, report_of
from prefect import flow, get_run_logger
from prefect.states import Completed, State

from docvec import ReindexSpec, Settings, connect


@flow(name="docvec-reindex")
def reindex_flow(spec: ReindexSpec | None = None) -> State:
    """Rebuild the collection as ``spec`` asks (another model, vector size, page budget or kind of pages;
    unset: the collection's own), as `docvec reindex` does; Failed when pages were lost, or when the new
    version, lacking pages the live one has, was not switched to (``spec.allow_loss`` switches)."""
    logger = get_run_logger()
    # the writes of a reindex wait for the other runs that write (flows/_limits.py)
    settings = Settings()
    with hold_slots(settings), connect(settings, notify=logger.info) as index:
        report = index.reindex(spec or ReindexSpec())
    logger.info(report.summary())
    for source in report.vanished:
        logger.warning(f"gone: {source}")
    for failure in report.failures:
        logger.warning(f"failed: {failure}")
    if report.pages_missing and not report.switched:
        return failed(f"not switched: {report.summary()}", report)
    if report.failures:
        return failed(f"{failures_line(report.failures)}; {report.summary()}", report)
    return Completed(message=report.summary(), data=report)


def parser() -> argparse.ArgumentParser:
    """The flow's command line: `docvec reindex`'s options, one for each field of :class:`ReindexSpec`."""
    ap = argparse.ArgumentParser(description="docvec reindex flow")
    ap.add_argument("--model", help="model of the new version (default: the collection's)")
    ap.add_argument("--dim", type=int, help="vector size of the new version")
    ap.add_argument("--max-pixels", type=int, help="page budget of the new version")
    kind = ap.add_mutually_exclusive_group()
    kind.add_argument(
        "--multivector",
        action="store_const",
        const=True,
        help="keep token vectors for late interaction (default: the collection's kind)",
    )
    kind.add_argument(
        "--single-vector", dest="multivector", action="store_const", const=False, help="keep no token vectors"
    )
    ap.add_argument(
        "--token-pool",
        type=int,
        metavar="N",
        help="multi-vector: average each run of N token vectors into one (default: the collection's)",
    )
    ap.add_argument(
        "--text",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep the pages' text for keyword search (--no-text: drop it); adding it embeds no page again",
    )
    ap.add_argument("--drop-old", action="store_true", help="remove the old version once the new one is live")
    ap.add_argument(
        "--allow-loss",
        action="store_true",
        help="switch even when the new version lacks pages the live one has (they leave the collection)",
    )
    return ap


def spec_from_args(argv: list[str] | None = None) -> ReindexSpec:
    """The spec the command line ``argv`` (default: this process's) asks for."""
    return ReindexSpec(**vars(parser().parse_args(argv)))


if __name__ == "__main__":
    state = reindex_flow(spec_from_args(), return_state=True)
    print(report_of(state).model_dump_json(indent=2))
    raise SystemExit(0 if state.is_completed() else 1)
