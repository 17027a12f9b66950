"""An index served by a running ``docvec serve``, with the verbs of the contract both faces keep
(:class:`docvec.IndexLike`), over its REST API.

:func:`docvec.connect` hands one out when the embedded store is held by a server: the store has one owner,
so other docvec processes on the machine (commands, flows) send their work to it instead of failing.
Long work (an ingest run, a reindex) is a job on the server; this client follows it to its end, reporting
its progress as :class:`Index` would. An error the server raises arrives as the same class with the same
message (the error body names it: :func:`docvec._errors.rebuild_error`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Literal, TypeVar, Unpack

import httpx
from pydantic import BaseModel

from . import _records as records
from ._closing import Closing
from ._config import Settings
from ._errors import (
    CollectionMismatchError,
    ConfigError,
    ConflictError,
    DocvecError,
    ForbiddenError,
    IngestError,
    InputError,
    NotFoundError,
    StoreError,
    StoreUnavailableError,
    rebuild_error,
)
from ._pipeline._ingest import IngestProgress, PageFn, ProgressFn
from ._pipeline._search import choose_mode

__all__ = ["RemoteIndex"]

M = TypeVar("M", bound=BaseModel)

#: how long a server that is starting may take to answer its first request
_START_S = 60.0
#: how often a job is asked where it stands
_POLL_S = 0.5


def _by_status(status: int, detail: str, errors: list[dict[str, Any]] | None) -> DocvecError:
    """The docvec error an answer without an error class stands for (a server older than error classes,
    or a proxy in front of it)."""
    if status == 401:
        return ConfigError(f"{detail}: set DOCVEC_API_KEY to the server's key")
    if status == 403:
        return ForbiddenError(detail)
    if status == 404:
        return NotFoundError(detail)
    if status == 409:
        return CollectionMismatchError(detail)
    if status == 422 and errors and "path" in errors[0]:
        return IngestError(detail, errors)
    if status in (400, 413, 422):
        return InputError(detail)
    if status == 503:
        return StoreUnavailableError(detail, url="", attempts=1)
    return StoreError(detail)


class RemoteIndex(Closing):
    """The index a docvec server at ``url`` serves, with the verbs of :class:`docvec.Index` (the contract
    both keep: :class:`docvec.IndexLike`), each a request; paths are the server's (``connect`` hands one
    out for a server on this machine). Files it downloads (page images, documents) are kept until
    :meth:`close`."""

    def __init__(
        self, url: str, settings: Settings, *, timeout: float = 300.0, token: str | None = None
    ) -> None:
        """A client of the server at ``url``; it sends ``token`` (the server's own user's, which
        :func:`docvec.connect` reads from the store's owner record), else the operator's key, else the
        reader's (``settings.operator_key``, ``settings.api_key``)."""
        self.url = url.rstrip("/")
        self.settings = settings
        self.collection = settings.collection
        key = token or settings.operator_key or settings.api_key
        headers = {"X-API-Key": key} if key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self._downloads: Path | None = None

    # -- requests ------------------------------------------------------------------------------------

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send a request, waiting for a server that is still starting; its answer, or the docvec error it
        stands for."""
        deadline = time.monotonic() + _START_S
        while True:
            try:
                response = self._http.request(method, path, **kwargs)
                break
            except httpx.ConnectError as e:
                if time.monotonic() >= deadline:
                    raise StoreUnavailableError(
                        f"the docvec server at {self.url} does not answer ({e})", url=self.url, attempts=1
                    ) from None
                time.sleep(0.5)
            except httpx.HTTPError as e:
                raise StoreUnavailableError(
                    f"the docvec server at {self.url} failed to answer: {e}", url=self.url, attempts=1
                ) from None
        if response.status_code >= 400:
            raise self._error(response)
        return response

    def _error(self, response: httpx.Response) -> DocvecError:
        try:
            body = response.json()
            detail, errors = str(body.get("detail")), body.get("errors")
        except (ValueError, AttributeError):
            return _by_status(response.status_code, response.text[:500] or response.reason_phrase, None)
        name = body.get("error")
        if isinstance(name, str):
            return rebuild_error(name, detail, body.get("fields"), errors)
        return _by_status(response.status_code, detail, errors)

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`_send`, and the answer's JSON."""
        return self._send(method, path, **kwargs).json()

    def _follow(self, job: dict[str, Any], result: type[M], progress: ProgressFn | None) -> M:
        """Wait for a job to end, telling ``progress`` where it stands; its result, or the error it ended
        with."""
        while job["status"] in ("queued", "running"):
            if progress is not None and job.get("documents_total"):  # nothing to say before it starts
                progress(
                    IngestProgress(
                        documents_total=job.get("documents_total", 0),
                        documents_done=job.get("documents_done", 0),
                        current=job.get("current"),
                        page=job.get("page", 0),
                        page_count=job.get("page_count", 0),
                        report=records.IngestReport(),
                    )
                )
            time.sleep(_POLL_S)
            job = self._request("GET", job["status_url"])
        if job["status"] == "failed":
            detail = str(job.get("detail"))
            raise rebuild_error(
                str(job.get("error") or "StoreError"), detail, job.get("fields"), job.get("errors")
            )
        if job["status"] == "cancelled":  # by a client of the server's (DELETE /jobs/{id})
            raise ConflictError(f"the server's job {job.get('name')!r} was cancelled: {job.get('detail')}")
        return result.model_validate(job["result"])

    def _download(self, path: str, name: str) -> Path:
        """GET ``path`` into this client's download folder as ``name``."""
        if self._downloads is None:
            self._downloads = Path(tempfile.mkdtemp(prefix="docvec-remote-"))
        target = self._downloads / name
        with self._http.stream("GET", path) as response:
            if response.status_code >= 400:
                response.read()
                raise self._error(response)
            with target.open("wb") as f:
                for chunk in response.iter_bytes():
                    f.write(chunk)
        return target

    # -- writing -------------------------------------------------------------------------------------

    def add(
        self,
        paths: Sequence[str | Path],
        *,
        tags: records.Tags = (),
        recursive: bool = True,
        prune: bool = False,
        progress: ProgressFn | None = None,
    ) -> records.IngestReport:
        """Index files, folders and globs (see :meth:`docvec.Index.add`), by the server."""
        # the server's working folder is not this one: every path goes absolute (a glob stays a glob)
        body = {
            "paths": [str(Path(p).expanduser().absolute()) for p in paths],
            "tags": list(records.parse_tags(tags)),
            "recursive": recursive,
            "prune": prune,
        }
        return self._follow(self._request("POST", "/ingest", json=body), records.IngestReport, progress)

    def add_upload(
        self,
        upload: BinaryIO,
        *,
        name: str | None = None,
        tags: records.Tags = (),
        limit: int | None = None,
        progress: PageFn | None = None,
    ) -> records.Upload:
        """Send a document to the server and have it indexed there (see :meth:`docvec.Index.add_upload`);
        ``limit`` is the server's own (``DOCVEC_MAX_UPLOAD_MB``), and ``progress`` hears nothing: the
        request answers once the document is indexed."""
        files = {"file": (name or "upload", upload)}
        sent = self._send(
            "POST",
            "/documents",
            params={"wait": "true"},
            files=files,
            data={"tag": list(records.parse_tags(tags))},
        )
        if sent.status_code == 202:  # the server stopped waiting (it is stopping): the job goes on there
            return self._follow(sent.json(), records.Upload, None)
        return records.Upload.model_validate(sent.json())

    def delete(self, target: str, *, by: Literal["auto", "doc_id", "path"] = "auto") -> int:
        """Remove a document by id (or id prefix), or every document read from a path (on the server: an
        absolute one); pages removed. What ``target`` names is the server's to decide, as
        :meth:`docvec.Index.delete` decides it."""
        try:
            answer = self._request("DELETE", "/documents", params={"target": target, "by": by})
        except NotFoundError:
            return 0
        return int(answer["pages_removed"])

    def prune(self) -> int:
        """Remove the documents whose files are gone; returns how many."""
        return self.add([], prune=True).documents_removed

    # -- reading -------------------------------------------------------------------------------------

    def search(
        self,
        query: str | records.Search,
        k: int | None = None,
        filter: records.SearchFilter | None = None,
        **options: Unpack[records.SearchOptions],
    ) -> records.SearchResult:
        """The pages that best match ``query`` (see :meth:`docvec.Index.search`), found by the server; its
        ``rerank`` default is the server's ``DOCVEC_RERANK`` (a server without a reranker refuses one:
        :class:`~docvec.ConflictError`). The search is checked here first, as the server checks it."""
        request = records.Search.of(query, k=k, filter=filter, **options)
        body = request.model_dump(mode="json", exclude_unset=True, exclude_none=True)
        return records.SearchResult.model_validate(self._request("POST", "/search", json=body))

    def search_mode(self, mode: records.ModeChoice | None = None) -> records.SearchMode:
        """The mode a search with ``mode`` (default: the server's ``DOCVEC_SEARCH_MODE``) runs in, by the
        rule the server applies to what its collection keeps (``/healthz``)."""
        health = self._request("GET", "/healthz")
        if mode is None:
            return health["search_mode"]  # type: ignore[no-any-return]
        return choose_mode(
            mode,
            multivector=bool(health.get("multivector")),
            text=bool(health.get("text")),
            collection=self.collection,
        )

    def documents(self, *, offset: int = 0, limit: int = 100) -> records.DocumentList:
        """Indexed documents ordered by name (then by source path), with the total: the server's order,
        the same for every caller (see :meth:`docvec.Index.documents`)."""
        return records.DocumentList.model_validate(
            self._request("GET", "/documents", params={"offset": offset, "limit": limit})
        )

    def pages_of(self, doc_id: str) -> list[records.Page]:
        """A document's indexed pages in order; :class:`~docvec.NotFoundError` for an unknown document."""
        detail = self._request("GET", f"/documents/{doc_id}")
        fields = set(records.Page.model_fields)
        return [
            records.Page.model_validate({"doc_id": doc_id} | {k: v for k, v in p.items() if k in fields})
            for p in detail["pages"]
        ]

    def page_file(self, doc_id: str, page: int, *, thumbnail: bool = False) -> Path:
        """The page's image (PNG) or thumbnail (JPEG), downloaded from the server."""
        what = "thumbnail" if thumbnail else "image"
        suffix = "jpg" if thumbnail else "png"
        return self._download(f"/documents/{doc_id}/pages/{page}/{what}", f"{doc_id}-{page}-{what}.{suffix}")

    def page_text(self, doc_id: str, page: int) -> records.PageText:
        """The page's whole text as the server's index keeps it."""
        return records.PageText.model_validate(self._request("GET", f"/documents/{doc_id}/pages/{page}/text"))

    def document_file(self, doc_id: str) -> records.DocumentFile:
        """The document's file as it was indexed, downloaded from the server, with its display name and
        kind."""
        info = self._request("GET", f"/documents/{doc_id}")
        path = self._download(f"/documents/{doc_id}/file", f"{doc_id}-{Path(str(info['name'])).name}")
        return records.DocumentFile(path=path, name=str(info["name"]), kind=info["kind"])

    def count(self) -> int:
        """Pages in the index."""
        return int(self._request("GET", "/healthz").get("pages") or 0)

    # -- versions ------------------------------------------------------------------------------------

    def reindex(
        self, spec: records.ReindexSpec | None = None, *, progress: ProgressFn | None = None
    ) -> records.ReindexReport:
        """Rebuild the collection in the server, which switches to the new version without a restart."""
        body = (spec or records.ReindexSpec()).model_dump(mode="json")
        return self._follow(self._request("POST", "/reindex", json=body), records.ReindexReport, progress)

    def versions(self) -> list[records.VersionInfo]:
        """The collection's versions, oldest first."""
        return [records.VersionInfo.model_validate(v) for v in self._request("GET", "/collections")]

    def drop_version(self, version: str) -> records.GcReport:
        """Delete a version that is not live (then collect the page store)."""
        return records.GcReport.model_validate(self._request("DELETE", f"/collections/{version}"))

    def gc(self) -> records.GcReport:
        """Remove the page images no version shows."""
        return records.GcReport.model_validate(self._request("POST", "/gc"))

    # -- lifetime ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (the server goes on) and remove the files downloaded."""
        self._http.close()
        if self._downloads is not None:
            shutil.rmtree(self._downloads, ignore_errors=True)
            self._downloads = None

    def __repr__(self) -> str:
        return f"RemoteIndex({self.collection!r} at {self.url})"
