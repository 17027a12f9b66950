"""The one context-manager shape docvec's resources share: ``with x:`` closes ``x`` on the way out."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Closing"]


class Closing:
    """A resource released by :meth:`close` (which a subclass defines), also as a context manager."""

    def close(self) -> None:
        """Release the resource; calling it again does nothing."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
