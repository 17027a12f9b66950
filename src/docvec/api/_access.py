"""Who may do what over the API: the one place that decides (docs/api.md, "Who may do what").

Three kinds of caller, each with the least right its work needs:

- a **reader** searches, lists and reads documents and pages, uploads and deletes documents: with
  ``DOCVEC_API_KEY`` set, the callers that send it (``X-API-Key``) or hold the search page's session cookie
  (HTTP-only: no script of the page can read it); without it, anyone who reaches the server;
- an **operator** also acts on the server's own files (ingest of server paths, reindex, versions, gc,
  deletes by path, stored payloads): the callers that send ``DOCVEC_OPERATOR_KEY``; without it, the
  programs on the server's machine (a loopback client naming the server by a loopback name, not a
  browser). Paths an operator names are confined to ``DOCVEC_INGEST_ROOTS``, and refused with one answer
  whether they exist or not;
- the **owner**: the docvec commands of the server's own user, which send the token the server leaves in
  its store's owner record (readable by that user only: whoever reads it can read the data folder
  anyway). They are operators whose paths are not confined.

A request from a browser must come from the page's own origin to change anything (a multipart POST is a
request any site can make a browser send), and a request from this machine must name the server by a
name it answers to (a page that rebinds its own name to 127.0.0.1 is not this machine's equal).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request

from .._config import Settings
from .._errors import ForbiddenError
from .._model._registry import REGISTRY_NAME, registry_names, reranker_names
from .._pipeline._sources import within_roots

__all__ = [
    "SESSION_COOKIE",
    "Access",
    "Caller",
    "Role",
    "caller",
    "require_operator",
]

#: the search page's session: a reader's credential the page's scripts cannot read (HttpOnly)
SESSION_COOKIE = "docvec_session"
#: what a session cookie holds: a MAC of this text under the reader's key (a new key ends every session)
_SESSION_TEXT = b"docvec search page session v1"
#: the names a client on the server's machine calls it by, besides DOCVEC_ALLOWED_HOSTS
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: requests that change nothing: a browser may send them from another site's page (it cannot read the
#: answer: no CORS headers are sent)
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Role(enum.IntEnum):
    """What a caller may do; each role may do what the ones below it may."""

    NONE = 0
    READER = 1
    OPERATOR = 2
    OWNER = 3


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: its role, and how it proved it."""

    role: Role
    #: how: "key", "operator-key", "session", "owner-token", "loopback", "open" (no key asked), "none"
    by: str

    @property
    def confined(self) -> bool:
        """Whether the server paths this caller names must lie under ``DOCVEC_INGEST_ROOTS``."""
        return self.role < Role.OWNER


def _host_name(host_header: str) -> str:
    """The host name of a Host header: ``[::1]:8000`` -> ``::1``, ``Example.org:80`` -> ``example.org``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class Access:
    """The rules of one server: its keys, its owner token, the folders its operators may read, the names
    it answers to from its own machine."""

    def __init__(self, settings: Settings, *, owner_token: str | None = None) -> None:
        """The rules ``settings`` set; ``owner_token`` (default: a new random one) is what the server's own
        user's commands send (the server writes it to its store's owner record)."""
        self.reader_key = settings.api_key or None
        self.operator_key = settings.operator_key or None
        self.owner_token = owner_token or secrets.token_urlsafe(32)
        self.roots = tuple(Path(r) for r in settings.ingest_roots)
        self.hosts = _LOOPBACK_NAMES | {h.lower() for h in settings.allowed_hosts}
        self.proxies = tuple(ipaddress.ip_network(p, strict=False) for p in settings.trusted_proxies)
        self._session = (
            hmac.new(self.reader_key.encode(), _SESSION_TEXT, hashlib.sha256).hexdigest()
            if self.reader_key
            else None
        )

    # -- who is calling ------------------------------------------------------------------------------

    def caller(self, headers: Mapping[str, str], client: str, cookies: Mapping[str, str]) -> Caller:
        """Who a request with these (lower-case) ``headers``, from ``client`` (its address, as the trusted
        proxies tell it), with these ``cookies`` is."""
        given = headers.get("x-api-key", "")
        if given:
            if _equal(given, self.owner_token):
                return Caller(Role.OWNER, "owner-token")
            if self.operator_key and _equal(given, self.operator_key):
                return Caller(Role.OPERATOR, "operator-key")
            if self.reader_key and _equal(given, self.reader_key):
                return self._local_or(Caller(Role.READER, "key"), headers, client)
            return Caller(Role.NONE, "none")  # a wrong key is refused, not taken as no key
        session = cookies.get(SESSION_COOKIE, "")
        if session and self._session and _equal(session, self._session):
            return Caller(Role.READER, "session")  # a browser's: never an operator
        if self.reader_key:
            return Caller(Role.NONE, "none")
        return self._local_or(Caller(Role.READER, "open"), headers, client)

    def _local_or(self, caller: Caller, headers: Mapping[str, str], client: str) -> Caller:
        """An operator when the server has no operator key and the request is a program's on this machine,
        else ``caller``."""
        if self.operator_key or not self.local(headers, client) or _from_browser(headers):
            return caller
        return Caller(Role.OPERATOR, "loopback")

    def local(self, headers: Mapping[str, str], client: str) -> bool:
        """Whether the request comes from this machine and names the server as this machine does. A
        request that still shows a trusted proxy's address came through it without naming its client:
        it is not this machine's."""
        return (
            _is_loopback(client)
            and not self._is_proxy(client)
            and _host_name(headers.get("host", "")) in self.hosts
        )

    def _is_proxy(self, client: str) -> bool:
        try:
            address = ipaddress.ip_address(client)
        except ValueError:
            return False
        return any(address in network for network in self.proxies)

    # -- what it may send ----------------------------------------------------------------------------

    def refusal(self, method: str, headers: Mapping[str, str], client: str, caller: Caller) -> str | None:
        """Why a request is refused whatever its route (a foreign name from this machine, a change sent
        from another site's page), or ``None``."""
        if _is_loopback(client) and _host_name(headers.get("host", "")) not in self.hosts:
            return (
                f"this server is not called {_host_name(headers.get('host', ''))!r} on its own machine: "
                "call it by localhost or 127.0.0.1, or name the host in DOCVEC_ALLOWED_HOSTS"
            )
        site = headers.get("sec-fetch-site", "")
        if method not in _SAFE_METHODS or caller.by == "session":
            if site in ("cross-site", "same-site"):
                return "a request from another site's page is refused: use the search page of this server"
            origin = headers.get("origin")
            if origin is not None and method not in _SAFE_METHODS and not self._same_origin(origin, headers):
                return "a request from another site's page is refused: use the search page of this server"
        return None

    @staticmethod
    def _same_origin(origin: str, headers: Mapping[str, str]) -> bool:
        # the scheme is the proxy's concern (X-Forwarded-Proto, when trusted): the host and port decide
        host = headers.get("host", "").lower()
        return origin.lower().partition("://")[2] == host

    # -- the session cookie --------------------------------------------------------------------------

    def session_for(self, key: str) -> str | None:
        """The session cookie's value for a caller who typed ``key`` into the search page: the reader's
        session when ``key`` is the reader's or the operator's key (the page needs a reader's rights
        only), ``None`` for a wrong key or a server that asks for none."""
        if self._session is None:
            return None
        keys = [k for k in (self.reader_key, self.operator_key) if k]
        return self._session if any(_equal(key, k) for k in keys) else None

    # -- paths an operator names ---------------------------------------------------------------------

    def confine(self, paths: Iterable[str], caller: Caller) -> None:
        """Refuse, with one answer whether they exist or not, the ``paths`` (files, folders, globs) a
        confined caller names outside ``DOCVEC_INGEST_ROOTS``."""
        if not caller.confined:
            return
        for raw in paths:
            if not self.within_roots(raw):
                raise ForbiddenError(
                    f"{_shown(raw)} is not under a folder this server ingests from over its API "
                    "(DOCVEC_INGEST_ROOTS"
                    + (f": {', '.join(str(r) for r in self.roots)})" if self.roots else ", which names none)")
                )

    def confine_model(self, model: str | None, caller: Caller) -> None:
        """Refuse a model a confined caller names by a path (with one answer whether it exists or not): over
        the API a reindex names a registry model; a model folder is for `docvec reindex` on the server."""
        if model is None or not caller.confined:
            return
        known = [*(n for n in registry_names() if n not in reranker_names()), REGISTRY_NAME]
        if model.strip().lower() not in known:
            raise ForbiddenError(
                f"model {_shown(model)}: a reindex over the API names a registry model ({', '.join(known)}); "
                "a model folder or file is named by `docvec reindex` on the server"
            )

    def within_roots(self, path: str | Path) -> bool:
        """Whether ``path`` lies under an ingest root (:func:`docvec._pipeline._sources.within_roots`)."""
        return within_roots(path, self.roots)

    def shown_source(self, source: str) -> str:
        """A document's source as a reader sees it: ``<root name>/<path in it>`` under an ingest root,
        else the file's name (the server's folders are the operator's business)."""
        path = Path(source)
        for root in self.roots:
            if root in path.parents:
                return f"{root.name}/{path.relative_to(root).as_posix()}"
        return path.name

    def actual_source(self, shown: str) -> str | None:
        """The server path a reader's ``<root name>/<path in it>`` names, or ``None`` when it names no
        ingest root (or climbs out of one)."""
        first, _, rest = shown.strip("/").partition("/")
        for root in self.roots:
            if root.name == first:
                target = Path(os.path.normpath(root / rest)) if rest else root
                return str(target) if target == root or root in target.parents else None
        return None


def _equal(given: str, expected: str) -> bool:
    return secrets.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def _from_browser(headers: Mapping[str, str]) -> bool:
    # every browser sends one of these with its requests (Fetch Metadata; Origin on cross-origin ones and
    # on every POST); programs (httpx, curl, the docvec commands) send neither
    return "sec-fetch-site" in headers or "sec-fetch-mode" in headers or "origin" in headers


def _shown(path: str) -> str:
    text = path.replace("\0", "\\0")
    return repr(text if len(text) <= 200 else text[:197] + "...")


def caller(request: Request) -> Caller:
    """The caller of a request, as the guard found it (``Role.NONE`` for a request that bypassed it)."""
    found = request.scope.get("state", {}).get("caller")
    return found if isinstance(found, Caller) else Caller(Role.NONE, "none")


def require_operator(request: Request) -> Caller:
    """A FastAPI dependency: the operator (or owner) making the request, else :class:`ForbiddenError`."""
    who = caller(request)
    if who.role < Role.OPERATOR:
        access: Access = request.app.state.access
        how = (
            "send DOCVEC_OPERATOR_KEY as X-API-Key"
            if access.operator_key
            else "this server has no operator key (DOCVEC_OPERATOR_KEY): it takes them from programs on "
            "its own machine only"
        )
        raise ForbiddenError(
            f"this endpoint acts on the server's files, which is the operator's right: {how}"
        )
    return who
