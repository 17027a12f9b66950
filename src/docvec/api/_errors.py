"""Every error to a status code and a JSON body (:class:`ErrorResponse`): the one place that does; a
response never carries a traceback. The body names the docvec error class and what it carries, so that a
client (:class:`docvec.RemoteIndex`) raises the same error with the same message; a request that breaks
one of docvec's own rules (``k``, an empty query, ...) is told what the library says, not what the request
validator would. Each class has one status (docs/api.md's table): a bad input is a 400 whether docvec's
rule or the request's shape refused it, as the library raises one :class:`~docvec.InputError` for both."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from .. import _errors as docvec_errors
from .._records import DOCVEC_RULE, shortened
from ._models import ErrorResponse

__all__ = ["error_response", "install_error_handlers", "status_of"]

log = logging.getLogger("docvec")


# Most specific first: the first class an error is an instance of decides its status.
_STATUS: list[tuple[type[docvec_errors.DocvecError], int]] = [
    (docvec_errors.ForbiddenError, 403),
    (docvec_errors.NotFoundError, 404),
    (docvec_errors.CollectionNotFoundError, 404),
    (docvec_errors.TooLargeError, 413),
    (docvec_errors.CollectionMismatchError, 409),
    (docvec_errors.ConflictError, 409),
    (docvec_errors.IngestError, 422),
    (docvec_errors.RenderError, 422),
    (docvec_errors.InputError, 400),
    (docvec_errors.StoreUnavailableError, 503),
    (docvec_errors.StoreBusyError, 503),
    (docvec_errors.StoreError, 500),
    (docvec_errors.ConfigError, 500),
]


#: the docvec error class of a refusal the framework makes itself (by its status)
_FRAMEWORK_CLASSES = {
    400: "InputError",
    401: "ForbiddenError",
    403: "ForbiddenError",
    404: "NotFoundError",
    405: "UnsupportedError",
    413: "TooLargeError",
}


def status_of(exc: docvec_errors.DocvecError) -> int:
    """The HTTP status for a docvec error (500 for any not listed)."""
    return next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)


def error_response(
    status: int,
    detail: str,
    errors: list[dict[str, Any]] | None = None,
    *,
    error: str | None = None,
    fields: dict[str, Any] | None = None,
) -> JSONResponse:
    """An error response with its :class:`ErrorResponse` body."""
    body = ErrorResponse(detail=detail, error=error, fields=fields or None, errors=errors)
    return JSONResponse(body.model_dump(exclude_none=True), status)


def _redacted(values: dict[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
    return {k: redact(v) if isinstance(v, str) else v for k, v in values.items()}


def _methods_on(routes: Sequence[BaseRoute], scope: Scope) -> set[str]:
    """The methods of every endpoint on the scope's path, in these routes and the routers they include
    (FastAPI's ``iter_route_contexts`` flattens them, each endpoint under its full path)."""
    methods: set[str] = set()
    for context in iter_route_contexts(routes):
        if context.methods is not None and context.matches(scope)[0] is not Match.NONE:
            methods |= context.methods
    return methods


def install_error_handlers(app: FastAPI, *, hide: dict[str, str] | None = None) -> Callable[[str], str]:
    """Map docvec errors, request validation errors and anything unexpected to JSON error responses.

    ``hide`` maps server paths to what a client is told instead (the full message goes to the log);
    the function that does that is returned, for other messages a client reads."""
    replacements = sorted((hide or {}).items(), key=lambda kv: -len(kv[0]))
    for path, shown in list(replacements):
        real = os.path.realpath(path)
        if real != path:
            replacements.append((real, shown))

    def redact(text: str) -> str:
        for path, shown in replacements:
            text = text.replace(path, shown)
        return text

    async def docvec_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, docvec_errors.DocvecError)
        status = status_of(exc)
        if status >= 500:
            log.error("%s %s: %s", request.method, request.url.path, exc)
        failures = [_redacted(f, redact) for f in getattr(exc, "failures", None) or []]
        fields = _redacted(docvec_errors.error_fields(exc), redact)
        return error_response(
            status, redact(str(exc)), failures or None, error=type(exc).__name__, fields=fields
        )

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        # Only where and what: echoing the input back could return a whole oversized query.
        errors = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": e.get("type")}
            for e in exc.errors()
        ]
        if errors and all(e["type"] == DOCVEC_RULE for e in errors):
            # docvec's own rule, in its own words: what the library raises for the same value
            detail = "; ".join(dict.fromkeys(e["msg"] for e in errors))
            return error_response(400, detail, error="InputError", fields={"reason": detail})
        # the request's shape (a wrong type, an unknown field): the same class, so the same status
        detail = "; ".join(f"{'.'.join(e['loc'][1:]) or e['loc'][0]}: {e['msg']}" for e in errors)
        return error_response(400, detail or "invalid request", errors, error="InputError")

    async def http_error(request: Request, exc: Exception) -> Response:
        # the framework's own refusals (no such endpoint, a body that is no JSON or no multipart) in
        # docvec's body, with the class a client raises again, like every other error
        assert isinstance(exc, HTTPException)
        status = exc.status_code
        if status == 405:
            # Starlette's Allow names the methods of the first route on the path; a path (/documents) can
            # have several routes, and a client is owed all their methods.
            allowed = sorted(_methods_on(request.app.router.routes, request.scope))
            path = shortened(request.url.path)
            detail = f"{path} does not take {request.method}: it takes {', '.join(allowed)}"
            response = error_response(405, detail, error=_FRAMEWORK_CLASSES[405])
            response.headers["Allow"] = ", ".join(allowed)
            return response
        if status == 404:
            detail = f"{shortened(request.url.path)} is no endpoint of this server (they are listed at /docs)"
        elif status == 400:
            why = str(exc.detail).rstrip(".")
            detail = f"the request's body cannot be read: {why[:1].lower()}{why[1:]}"
        else:
            detail = str(exc.detail)
        response = error_response(status, detail, error=_FRAMEWORK_CLASSES.get(status, "DocvecError"))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, "internal error", error="DocvecError")

    app.add_exception_handler(docvec_errors.DocvecError, docvec_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected_error)
    return redact
