"""docvec's REST API and search page (``docvec serve``): FastAPI over :class:`docvec.Index`.

``create_app(settings)`` builds the application for any ASGI server; ``docvec serve`` runs it with
uvicorn. The request and response models are exported with it (their JSON Schemas: ``schemas/api-*``).
"""

from __future__ import annotations

from ._app import create_app
from ._guard import MAX_REQUEST_BYTES
from ._models import (
    API_MODELS,
    MAX_QUERY_CHARS,
    DeleteResponse,
    DocumentDetail,
    ErrorResponse,
    HealthResponse,
    PageInfo,
    SearchHitOut,
    SearchRequest,
    SearchResponse,
)

__all__ = [
    "API_MODELS",
    "MAX_QUERY_CHARS",
    "MAX_REQUEST_BYTES",
    "DeleteResponse",
    "DocumentDetail",
    "ErrorResponse",
    "HealthResponse",
    "PageInfo",
    "SearchHitOut",
    "SearchRequest",
    "SearchResponse",
    "create_app",
]
