"""Pure ASGI middleware in front of every endpoint: the API key, then the request body's size limit."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ._models import ErrorResponse

__all__ = ["MAX_REQUEST_BYTES", "Guard"]

#: Largest body of any request but an upload (search queries are short).
MAX_REQUEST_BYTES = 1024 * 1024
#: Multipart framing around an upload: boundaries and part headers.
_MULTIPART_SLACK = 64 * 1024

_Scope = MutableMapping[str, Any]
_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]
_ASGIApp = Callable[[_Scope, _Receive, _Send], Awaitable[None]]

#: Open without an API key: the liveness probe and the web page (which asks for the key itself).
_OPEN_PATHS = frozenset({"/", "/healthz"})


async def _send_error(send: _Send, status: int, detail: str, error: str) -> None:
    body = ErrorResponse(detail=detail, error=error).model_dump_json(exclude_none=True).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Pure ASGI middleware: API key check, then body size limit (by header, and counted as it streams)."""

    def __init__(self, app: _ASGIApp, *, api_key: str | None, upload_limit: int) -> None:
        self.app = app
        self.api_key = api_key
        self.upload_limit = upload_limit

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.api_key and scope["path"] not in _OPEN_PATHS:
            given = headers.get("x-api-key", "")
            if not secrets.compare_digest(given.encode(), self.api_key.encode()):
                await _send_error(
                    send,
                    401,
                    "missing or wrong X-API-Key header (docvec sends DOCVEC_API_KEY)",
                    "ForbiddenError",
                )
                return
        upload = scope["method"] == "POST" and scope["path"] == "/documents"
        limit = self.upload_limit + _MULTIPART_SLACK if upload else MAX_REQUEST_BYTES
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _send_error(send, 413, f"request body over {limit} bytes", "TooLargeError")
            return
        received = 0
        started = rejected = False

        async def counting_receive() -> _Message:
            nonlocal received, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # A body streamed past its limit without a (truthful) length: answer 413 now and tell
                    # the app the client left, since frameworks turn errors raised while reading into 400s.
                    rejected = True
                    if not started:
                        await _send_error(send, 413, f"request body over {limit} bytes", "TooLargeError")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: _Message) -> None:
            nonlocal started
            if rejected:
                return  # the 413 went out instead
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not rejected:
                raise
            # the app's reaction to the disconnect we reported: nothing more to say
