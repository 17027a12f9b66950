"""Pure ASGI middleware in front of every endpoint: who the caller is (:mod:`docvec.api._access`), what
every route refuses whoever asks, the reader's right for all but the open paths, the request body's size
limit, and the headers every answer carries."""

from __future__ import annotations

from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._access import Access, Role
from ._models import ErrorResponse

__all__ = ["MAX_REQUEST_BYTES", "OPEN_PATHS", "Guard", "send_error"]

#: Largest body of any request but an upload (search queries are short).
MAX_REQUEST_BYTES = 1024 * 1024
#: Multipart framing around an upload: boundaries and part headers.
_MULTIPART_SLACK = 64 * 1024

#: Open without a key: the liveness probe, the search page and its script and style (the page asks for
#: the key itself), and the session the page signs in to.
OPEN_PATHS = frozenset({"/", "/healthz", "/app.js", "/app.css", "/session"})

#: what every answer says: never guess a type from the bytes (a stored file is served by its verified
#: type), never be framed, never tell another site where its link was followed from
_ALWAYS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
#: an answer that sets no policy of its own (JSON, errors) runs nothing and loads nothing if opened
_NO_CONTENT_POLICY = (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'; sandbox")


async def send_error(send: Send, status: int, detail: str, error: str) -> None:
    """Answer with an :class:`ErrorResponse` and the headers every answer carries."""
    body = ErrorResponse(detail=detail, error=error).model_dump_json(exclude_none=True).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *_ALWAYS,
                _NO_CONTENT_POLICY,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _with_policy(message: Message) -> Message:
    """A response start with the headers every answer carries (a route's own Content-Security-Policy
    kept)."""
    headers = list(message.get("headers", []))
    names = {name.lower() for name, _ in headers}
    headers += [h for h in _ALWAYS if h[0] not in names]
    content_type = next((v for n, v in headers if n.lower() == b"content-type"), b"")
    if b"content-security-policy" not in names and content_type.startswith(b"application/json"):
        headers.append(_NO_CONTENT_POLICY)
    return {**message, "headers": headers}


class Guard:
    """Pure ASGI middleware: who is calling, what is refused whoever asks, the reader's right, then the
    body size limit (by header, and counted as it streams); every answer gets the headers of
    :data:`_ALWAYS`."""

    def __init__(self, app: ASGIApp, *, access: Access, upload_limit: int) -> None:
        self.app = app
        self.access = access
        self.upload_limit = upload_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        client = scope["client"][0] if scope.get("client") else ""
        who = self.access.caller(headers, client, cookie_parser(headers.get("cookie", "")))
        scope.setdefault("state", {})["caller"] = who
        refused = self.access.refusal(scope["method"], headers, client, who)
        if refused:
            await send_error(send, 403, refused, "ForbiddenError")
            return
        if who.role < Role.READER and scope["path"] not in OPEN_PATHS:
            await send_error(
                send,
                401,
                "missing or wrong X-API-Key header (docvec sends DOCVEC_API_KEY or DOCVEC_OPERATOR_KEY)",
                "ForbiddenError",
            )
            return

        async def with_headers(message: Message) -> None:
            await send(_with_policy(message) if message["type"] == "http.response.start" else message)

        await self._limited(scope, receive, with_headers, headers)

    async def _limited(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        """The app, with the request body held to its limit."""
        upload = scope["method"] == "POST" and scope["path"] == "/documents"
        limit = self.upload_limit + _MULTIPART_SLACK if upload else MAX_REQUEST_BYTES
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await send_error(send, 413, f"request body over {limit} bytes", "TooLargeError")
            return
        received = 0
        started = rejected = False

        async def counting_receive() -> Message:
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
                        await send_error(send, 413, f"request body over {limit} bytes", "TooLargeError")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
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
