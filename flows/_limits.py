"""The Prefect global concurrency limits docvec's flows hold while they have the index open, so that runs
that overlap (a schedule firing while the last run still works, a batch query meanwhile, two workers) wait
for each other instead of failing:

- ``docvec-store-writes`` (limit 1): the embedded store (``DOCVEC_QDRANT_URL`` unset) has one owner at a
  time, and a second process that opens it waits up to ``DOCVEC_STORE_WAIT_S``, then fails
  (``StoreBusyError``). Every run that opens it takes this
  slot, a batch query too (even a reader owns the embedded store). A Qdrant server takes writers side by
  side (point ids are deterministic), so with one no run takes this slot.
- ``docvec-embed`` (default 1): one slot per model instance a run loads, held from opening the index to
  closing it (the model lives that long); raise it to the number of instances your workers can hold.

A limit the Prefect server lacks is created at its default before a slot is taken, and never changed once
it is there (an operator may have raised ``docvec-embed``): Prefect 3.9 would otherwise skip a missing
limit with a warning and let the run go unguarded. With no server (``python flows/ingest.py``: an
ephemeral server starts in the process) the same happens there, and the run goes on as before.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from uuid import UUID

import httpx
from prefect import get_client, get_run_logger
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.client.schemas.objects import ConcurrencyLeaseHolder
from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError
from prefect.concurrency.sync import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
from prefect.runtime import flow_run

from docvec import Settings

STORE_WRITES = "docvec-store-writes"
EMBED = "docvec-embed"
#: what a missing limit is created with
DEFAULT_LIMITS = {STORE_WRITES: 1, EMBED: 1}


def limits_for(settings: Settings) -> list[str]:
    """The limits a run with ``settings`` holds while it has the index open."""
    return [EMBED] if settings.qdrant_url else [STORE_WRITES, EMBED]


def ensure_limits(names: list[str]) -> None:
    """Create those of ``names`` the Prefect server lacks, at their defaults; leave the others as they are."""
    with get_client(sync_client=True) as client:
        for name in names:
            try:
                client.read_global_concurrency_limit_by_name(name)
            except ObjectNotFound:
                try:
                    limit = GlobalConcurrencyLimitCreate(name=name, limit=DEFAULT_LIMITS[name])
                    client.create_global_concurrency_limit(limit)
                except ObjectAlreadyExists:
                    pass  # another run created it meanwhile


def _locked(error: ConcurrencySlotAcquisitionError) -> bool:
    # the server answers 423 Locked when every slot is taken; anything else is a real failure
    cause = error.__cause__
    return isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code == 423


@contextmanager
def hold_slots(settings: Settings) -> Iterator[None]:
    """Hold a slot of each limit a run with ``settings`` needs (:func:`limits_for`) while the block runs,
    waiting as long as other runs hold them, and saying so in the run's log."""
    names = limits_for(settings)
    ensure_limits(names)
    run_id = flow_run.get_id()
    take = functools.partial(
        concurrency,
        names,
        strict=True,  # they exist now; if one vanished, fail rather than run unguarded
        holder=ConcurrencyLeaseHolder(type="flow_run", id=UUID(run_id)) if run_id else None,
        # a passing API error while renewing the lease must not kill a long ingest; should the lease lapse,
        # the embedded store's own lock still refuses a second owner
        raise_on_lease_renewal_failure=False,
    )
    with ExitStack() as stack:
        try:
            stack.enter_context(take(max_retries=0))
        except ConcurrencySlotAcquisitionError as e:
            if not _locked(e):
                raise
            logger = get_run_logger()
            logger.info(f"waiting for a slot of {', '.join(names)}: another run holds it")
            started = time.monotonic()
            stack.enter_context(take())
            logger.info(f"took a slot of {', '.join(names)} after {time.monotonic() - started:.0f} s")
        yield
