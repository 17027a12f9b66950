"""The application: one :class:`docvec.Index` opened in the lifespan and shared by every request, the
guard in front, the error mapping, the routes."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from .._config import Settings
from .._index import Index
from ._access import Access
from ._admin import router as admin_router
from ._errors import install_error_handlers
from ._guard import Guard
from ._jobs import Jobs
from ._models import ErrorResponse
from ._reads import ReadsOnly
from ._routes import router

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["create_app"]

log = logging.getLogger("docvec")


def create_app(settings: Settings, *, index: Index | None = None, reads_only: str | None = None) -> FastAPI:
    """The docvec API for ``settings``; the model and the stores are opened when the app starts.

    Who may do what (``settings.api_key``, ``operator_key``, ``ingest_roots``, ``trusted_proxies``,
    ``allowed_hosts``) is :mod:`docvec.api._access`'s; ``app.state.access.owner_token`` is what the server's
    own user's commands send (``docvec serve`` writes it to the store's owner record).
    ``settings.max_upload_mb`` bounds ``POST /documents``. ``index``, when given, is an open (and prepared)
    index the app serves instead, and leaves open for its owner (``docvec serve`` opens it first, to report
    a failure in one line).

    ``reads_only``, when given, names a command that holds the store and writes to it: the app then answers
    searches and reads only (:class:`~docvec.api._reads.ReadsOnly`), runs no jobs, and loads the model at
    the first search instead of at its start (most commands end without one).
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One owner of the embedded store: this process, for its whole life.
        with contextlib.ExitStack() as stack:
            served = index or stack.enter_context(Index.open(settings))
            app.state.index = served
            if reads_only is None:
                served.prepare()  # a bad model fails now, not at the first request
                # resumes the uploads a stop or a crash left queued
                app.state.jobs = jobs = Jobs(app.state.redact, index=served)
                stack.callback(jobs.close)  # before the index closes: the running job stops at its next page
            log.info("serving %s from %s", settings.collection, settings.data_dir)
            try:
                if agents is None:
                    yield
                else:
                    # the MCP sessions' task group lives as long as the app
                    async with agents.session_manager.run():
                        yield
            finally:
                del app.state.index

    # Swagger UI from docvec's own process: /docs works without a network (ReDoc is left out: it fetches
    # its logo from a CDN all the same)
    app = FastAPIOffline(
        redoc_url=None,
        title="docvec",
        summary="Visual document retrieval: text queries answered with the best matching pages.",
        lifespan=lifespan,
        responses={
            400: {"model": ErrorResponse},
            401: {"model": ErrorResponse},
            403: {"model": ErrorResponse},
            404: {"model": ErrorResponse},
            409: {"model": ErrorResponse},
            422: {"model": ErrorResponse},
            503: {"model": ErrorResponse},
        },
    )
    app.state.upload_limit = settings.max_upload_mb * 1024 * 1024
    app.state.sync_upload_limit = int(settings.sync_upload_mb * 1024 * 1024)
    # the server's own folders never reach a client's error message
    app.state.redact = install_error_handlers(app, hide={str(settings.data_dir): "<data folder>"})
    app.state.access = access = Access(settings)
    if reads_only is not None:
        # added first, so inside the guard: a caller without the right to read is told that first, and the
        # refusal carries the headers every answer does
        app.add_middleware(ReadsOnly, holder=reads_only)
    app.add_middleware(Guard, access=access, upload_limit=app.state.upload_limit)
    if settings.trusted_proxies:
        # outermost: the guard judges the client the proxy names, and only a trusted proxy may name one
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxies)
    app.include_router(router)
    app.include_router(admin_router)
    agents = None if reads_only is not None else _mcp_server(app, settings)
    return app


def _mcp_server(app: FastAPI, settings: Settings) -> MCPServer | None:
    """The MCP server over streamable HTTP at ``/mcp``, on the app's index, behind the same guard (the
    reader's key, the hosts it answers to) as every route; ``None`` without the ``mcp`` extra."""
    try:
        from mcp.server.transport_security import TransportSecuritySettings

        from ..mcp import create_server
    except ImportError:
        log.info("no MCP endpoint: the mcp package is not installed (pip install 'docvec[mcp]')")
        return None
    roots = settings.ingest_roots if settings.mcp_add else []
    server = create_server(lambda: app.state.index, add_roots=roots)
    # the guard checks the Host header against the names this server answers to: the SDK need not
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app.router.routes.extend(mcp_app.routes)
    return server
