"""What a server that answers reads only lets through: the server a docvec command runs beside its own work
while it holds the embedded store (``docvec ingest``, ``docvec reindex``), so that searches from other
processes go on (:mod:`docvec._cli._sharing`). Every write waits for that command's end instead."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from ._guard import send_error

__all__ = ["ReadsOnly"]

#: the writes that are not writes to the index: a search sent as POST (a long query), signing the page in
#: and out
_READ_POSTS = frozenset({("POST", "/search"), ("POST", "/session"), ("DELETE", "/session")})


def _is_read(method: str, path: str) -> bool:
    if (method, path) in _READ_POSTS:
        return True
    # the jobs are the serving process's: a command's server runs none
    return method in ("GET", "HEAD") and not path.startswith("/jobs")


class ReadsOnly:
    """Pure ASGI middleware: a request that would write (or read the jobs a server runs) is answered 503,
    as :class:`~docvec.StoreBusyError`, naming ``holder``, the command that holds the store."""

    def __init__(self, app: ASGIApp, *, holder: str) -> None:
        self.app = app
        self.holder = holder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _is_read(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        detail = (
            f"this server answers searches only, while {self.holder} holds the store: "
            "send writes when it ends (the docvec commands wait for it by themselves)"
        )
        await send_error(send, 503, detail, "StoreBusyError")
