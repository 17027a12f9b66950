"""An index served by a running ``docvec serve``, with the verbs of :class:`docvec.Index`, over its REST API.

:func:`docvec.connect` hands one out when the embedded store is held by a server: the store has one owner,
so other docvec processes on the machine (commands, flows) send their work to it instead of failing.
Long work (an ingest run, a reindex) is a job on the server; this client follows it to its end, reporting
its progress as :class:`Index` would.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel

from ._closing import Closing
from ._config import Settings
from ._errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    ConfigError,
    DocvecError,
    ForbiddenError,
    IngestError,
    InputError,
    NotFoundError,
    StoreError,
    StoreUnavailableError,
)
from ._ingest import IngestProgress, ProgressFn
from ._records import (
    DocumentList,
    GcReport,
    Hit,
    IngestReport,
    ReindexReport,
    SearchFilter,
    SearchMode,
    VersionInfo,
)

__all__ = ["RemoteIndex"]

M = TypeVar("M", bound=BaseModel)

#: how long a server that is starting may take to answer its first request
_START_S = 60.0
#: how often a job is asked where it stands
_POLL_S = 0.5


def _error(status: int, detail: str, errors: list[dict[str, Any]] | None) -> DocvecError:
    """The docvec error a server's answer stands for (the reverse of the API's own mapping)."""
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
    """The index a docvec server at ``url`` serves: the same verbs as :class:`docvec.Index` (``add``,
    ``search``, ``documents``, ``delete``, ``prune``, ``count``, ``reindex``, ``versions``,
    ``drop_version``, ``gc``), each a request (paths are the server's: it runs on this machine)."""

    def __init__(self, url: str, settings: Settings, *, timeout: float = 300.0) -> None:
        self.url = url.rstrip("/")
        self.settings = settings
        self.collection = settings.collection
        headers = {"X-API-Key": settings.api_key} if settings.api_key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    # -- requests ------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request, waiting for a server that is still starting; its JSON answer, or the docvec
        error it stands for."""
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
            try:
                body = response.json()
                detail, errors = str(body.get("detail")), body.get("errors")
            except ValueError:
                detail, errors = response.text[:500] or response.reason_phrase, None
            raise _error(response.status_code, detail, errors)
        return response.json()

    def _follow(self, job: dict[str, Any], result: type[M], progress: ProgressFn | None) -> M:
        """Wait for a job to end, telling ``progress`` where it stands; its result."""
        while job["status"] in ("queued", "running"):
            if progress is not None and job.get("documents_total"):  # nothing to say before it starts
                progress(
                    IngestProgress(
                        documents_total=job.get("documents_total", 0),
                        documents_done=job.get("documents_done", 0),
                        current=job.get("current"),
                        page=job.get("page", 0),
                        page_count=job.get("page_count", 0),
                        report=IngestReport(),
                    )
                )
            time.sleep(_POLL_S)
            job = self._request("GET", job["status_url"])
        if job["status"] == "failed":
            errors = job.get("errors")
            if errors:
                raise IngestError(str(job.get("detail")), errors)
            raise StoreError(f"the server's job failed: {job.get('detail')}")
        return result.model_validate(job["result"])

    # -- verbs ---------------------------------------------------------------------------------------

    def add(
        self,
        paths: Sequence[str | Path],
        *,
        tags: Sequence[str] = (),
        recursive: bool = True,
        prune: bool = False,
        progress: ProgressFn | None = None,
    ) -> IngestReport:
        """Index files, folders and globs (see :meth:`docvec.Index.add`), by the server."""
        # the server's working folder is not this one: every path goes absolute (a glob stays a glob)
        body = {
            "paths": [str(Path(p).expanduser().absolute()) for p in paths],
            "tags": list(tags),
            "recursive": recursive,
            "prune": prune,
        }
        return self._follow(self._request("POST", "/ingest", json=body), IngestReport, progress)

    def prune(self) -> int:
        """Remove the documents whose files are gone; returns how many."""
        return self.add([], prune=True).documents_removed

    def search(
        self,
        query: str,
        k: int = 5,
        filter: SearchFilter | None = None,
        *,
        mode: SearchMode | Literal["auto"] | None = None,
        prefetch: int | None = None,
    ) -> list[Hit]:
        """The ``k`` pages that best match ``query`` (see :meth:`docvec.Index.search`)."""
        body: dict[str, Any] = {"query": query, "k": k, "mode": mode, "prefetch": prefetch}
        if filter is not None:
            body["filter"] = filter.model_dump(mode="json", exclude_none=True)
        answer = self._request("POST", "/search", json=body)
        fields = set(Hit.model_fields)
        return [Hit.model_validate({k: v for k, v in h.items() if k in fields}) for h in answer["hits"]]

    def documents(self, *, offset: int = 0, limit: int = 100) -> DocumentList:
        """Indexed documents ordered by source path, with the total."""
        return DocumentList.model_validate(
            self._request("GET", "/documents", params={"offset": offset, "limit": limit})
        )

    def delete(self, target: str, *, by: Literal["auto", "doc_id", "path"] = "auto") -> int:
        """Remove a document by id (or id prefix), or every document read from a path; pages removed."""
        if by == "path" or (by == "auto" and (Path(target).expanduser().exists() or "/" in target)):
            target = str(Path(target).expanduser().resolve())
        try:
            answer = self._request("DELETE", "/documents", params={"target": target})
        except NotFoundError:
            return 0
        return int(answer["pages_removed"])

    def count(self) -> int:
        """Pages in the index."""
        return int(self._request("GET", "/healthz").get("pages") or 0)

    def reindex(
        self,
        *,
        model: str | None = None,
        dim: int | None = None,
        max_pixels: int | None = None,
        multivector: bool | None = None,
        token_pool: int | None = None,
        drop_old: bool = False,
        progress: ProgressFn | None = None,
    ) -> ReindexReport:
        """Rebuild the collection in the server, which switches to the new version without a restart."""
        body = {
            "model": model,
            "dim": dim,
            "max_pixels": max_pixels,
            "multivector": multivector,
            "token_pool": token_pool,
            "drop_old": drop_old,
        }
        return self._follow(self._request("POST", "/reindex", json=body), ReindexReport, progress)

    def versions(self) -> list[VersionInfo]:
        """The collection's versions, oldest first."""
        return [VersionInfo.model_validate(v) for v in self._request("GET", "/collections")]

    def drop_version(self, version: str) -> GcReport:
        """Delete a version that is not live (then collect the page store)."""
        try:
            return GcReport.model_validate(self._request("DELETE", f"/collections/{version}"))
        except NotFoundError as e:
            raise CollectionNotFoundError(str(e)) from None

    def gc(self) -> GcReport:
        """Remove the page images no version shows."""
        return GcReport.model_validate(self._request("POST", "/gc"))

    # -- lifetime --------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (the server goes on)."""
        self._http.close()

    def __repr__(self) -> str:
        return f"RemoteIndex({self.collection!r} at {self.url})"
