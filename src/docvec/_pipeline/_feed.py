"""Streams run ahead: a thread that runs the ingest stage's document streams (rendering, reading stored
images) in order, while the stage embeds what they gave before.

Written by hand because the standard library's executors run calls, not a generator's items through a
bounded queue with an orderly stop, and no well-kept library does that small piece: a thread, two queues.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["END", "Ended", "Failed", "Feed"]

K = TypeVar("K")
T = TypeVar("T")

#: how often a hand-over blocked on a full queue looks whether the feed is closing (seconds)
_POLL_S = 0.05


class Ended:
    """What follows the last item of a stream that ended (:data:`END`)."""

    def __repr__(self) -> str:
        return "END"


#: what follows the last item of a stream that ended
END = Ended()


@dataclasses.dataclass(frozen=True)
class Failed:
    """What follows the last item of a stream that raised: the exception, for the taker to raise or
    report in its own thread."""

    error: Exception


class Feed(Generic[K, T]):
    """Runs the streams it is given (:meth:`put`: a key, and a callable that makes the stream's iterator),
    one after another in the order given, in a thread of its own, and hands their items over (:meth:`get`)
    in that order, at most ``ahead`` items waiting at a time (the ends of streams are not counted): what
    the streams wait on (the render worker processes) runs while the taker works on what came before.

    Each stream's items are followed by :data:`END`, or by :class:`Failed` when it raised. A context
    manager: leaving it stops the thread after the item it is on, closing the stream it was in (its
    ``finally`` runs in the feed's thread, as the rest of it did)."""

    def __init__(self, ahead: int) -> None:
        if ahead < 1:
            raise ValueError(f"ahead must be at least 1, got {ahead}")
        self._todo: queue.SimpleQueue[tuple[K, Callable[[], Iterator[T]]] | None] = queue.SimpleQueue()
        self._out: queue.SimpleQueue[tuple[K, T | Ended | Failed]] = queue.SimpleQueue()
        self._room = threading.Semaphore(ahead)  # taken by each item handed over, given back as it is taken
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="docvec-feed", daemon=True)
        #: streams given whose END (or Failed) has not been taken yet
        self.open = 0

    def __enter__(self) -> Feed[K, T]:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def put(self, key: K, stream: Callable[[], Iterator[T]]) -> None:
        """Queue a stream, to run once those given before it have ended."""
        self._todo.put((key, stream))
        self.open += 1

    def get(self) -> tuple[K, T | Ended | Failed]:
        """The next item of the streams, with its stream's key; blocks until there is one (there must be
        an open stream)."""
        if not self.open:
            raise RuntimeError("no stream is open: nothing would come")
        key, item = self._out.get()
        if isinstance(item, Ended | Failed):
            self.open -= 1
        else:
            self._room.release()
        return key, item

    def close(self) -> None:
        """Stop the thread, once it is done with the item it is on; what waits is dropped. Idempotent."""
        self._closing.set()
        self._todo.put(None)
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while (task := self._todo.get()) is not None and not self._closing.is_set():
            key, stream = task
            end: Ended | Failed = END
            try:
                items = stream()
                try:
                    for item in items:
                        if not self._hand(key, item):
                            return
                finally:
                    close = getattr(items, "close", None)
                    if close is not None:
                        close()
            except Exception as e:  # the taker's to judge, in its thread
                end = Failed(e)
            self._out.put((key, end))

    def _hand(self, key: K, item: T) -> bool:
        """Put ``item`` out once there is room; ``False`` when the feed closes first."""
        while not self._closing.is_set():
            if self._room.acquire(timeout=_POLL_S):
                self._out.put((key, item))
                return True
        return False
