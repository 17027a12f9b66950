"""docvec: visual document retrieval with vision-language embedding models through llama.cpp.

>>> import docvec
>>> with docvec.Index.open("~/docvec-data") as index:            # doctest: +SKIP
...     index.add(["~/papers"], tags=["team=legal"])
...     hits = index.search("total amount due", k=5)

:class:`Index` is the front door: it indexes files and folders, answers queries with the best pages, lists
and deletes documents, rebuilds its collection with other settings (``reindex``). :func:`connect` opens it
as the command line and the flows do: the running server's, when ``docvec serve`` holds the store.
:class:`Embedder` gives the vectors themselves, :class:`Reranker` a reranker's scores of (query, page image)
pairs. Every error docvec raises is a :class:`DocvecError` (the
tree: ``docvec._errors``).
"""

from ._client import RemoteIndex
from ._config import EmbedSettings, RenderSettings, Settings
from ._connect import connect
from ._contract import IndexLike
from ._errors import (
    BackendError,
    CheckpointError,
    CollectionMismatchError,
    CollectionNotFoundError,
    ConfigError,
    ConflictError,
    DiskFullError,
    DocvecError,
    ForbiddenError,
    ForeignCollectionError,
    IngestError,
    InputError,
    ModelError,
    ModelFileError,
    ModelMismatchError,
    ModelNotFoundError,
    NotFoundError,
    PageStoreError,
    RenderError,
    RendererStartError,
    RendererStateError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    TaskNotFoundError,
    TooLargeError,
    ToolError,
    UnsupportedError,
)
from ._index import Index
from ._model import Embedder, ModelFiles, Reranker
from ._model._embedder import ImageStates, TokenStates
from ._model._gguf import GGUFInfo
from ._pipeline._ingest import IngestProgress
from ._pipeline._queue import QueuedUpload
from ._pipeline._sources import Discovered, SourceDocument, discover
from ._records import (
    DocumentList,
    DocumentSummary,
    GcReport,
    Hit,
    IngestFailure,
    IngestReport,
    ModelFingerprint,
    PagePayload,
    PageText,
    ReindexReport,
    ReindexSpec,
    SearchFilter,
    Upload,
    VersionInfo,
    check_k,
)
from ._store import PageStore, StoredPage
from ._text._snippet import Snippet

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "CheckpointError",
    "CollectionMismatchError",
    "CollectionNotFoundError",
    "ConfigError",
    "ConflictError",
    "Discovered",
    "DiskFullError",
    "DocumentList",
    "DocumentSummary",
    "DocvecError",
    "EmbedSettings",
    "Embedder",
    "ForbiddenError",
    "ForeignCollectionError",
    "GGUFInfo",
    "GcReport",
    "Hit",
    "ImageStates",
    "Index",
    "IndexLike",
    "IngestError",
    "IngestFailure",
    "IngestProgress",
    "IngestReport",
    "InputError",
    "ModelError",
    "ModelFileError",
    "ModelFiles",
    "ModelFingerprint",
    "ModelMismatchError",
    "ModelNotFoundError",
    "NotFoundError",
    "PagePayload",
    "PageStore",
    "PageStoreError",
    "PageText",
    "QueuedUpload",
    "ReindexReport",
    "ReindexSpec",
    "RemoteIndex",
    "RenderError",
    "RenderSettings",
    "RendererStartError",
    "RendererStateError",
    "Reranker",
    "SearchFilter",
    "Settings",
    "Snippet",
    "SourceDocument",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "StoredPage",
    "TaskNotFoundError",
    "TokenStates",
    "TooLargeError",
    "ToolError",
    "UnsupportedError",
    "Upload",
    "VersionInfo",
    "__version__",
    "check_k",
    "connect",
    "discover",
]
