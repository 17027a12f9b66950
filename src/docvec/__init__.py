"""docvec: visual document retrieval with vision-language embedding models through llama.cpp.

>>> import docvec
>>> with docvec.Index.open("~/docvec-data") as index:            # doctest: +SKIP
...     index.add(["~/papers"], tags=["team=legal"])
...     hits = index.search("total amount due", k=5)

:class:`Index` is the front door: it indexes files and folders, answers queries with the best pages, lists
and deletes documents, rebuilds its collection with other settings (``reindex``). :func:`connect` opens it
as the command line and the flows do: the running server's, when ``docvec serve`` holds the store.
:class:`Embedder` gives the vectors themselves, :class:`Reranker` a reranker's scores of (query, page image)
pairs. A search is one value, :class:`Search` (what every face takes), answered by a :class:`SearchResult`.
Every error docvec raises is a :class:`DocvecError`; those a caller acts on are here, the whole tree is in
``docvec._errors``.
"""

import inspect

from ._client import RemoteIndex
from ._config import EmbedSettings, RenderSettings, Settings
from ._connect import connect
from ._contract import IndexLike
from ._errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    ConfigError,
    ConflictError,
    DiskFullError,
    DocvecError,
    ForbiddenError,
    IngestError,
    InputError,
    ModelError,
    ModelNotFoundError,
    NotFoundError,
    RenderError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    TooLargeError,
)
from ._index import Index
from ._model import Embedder, ModelFiles, Reranker
from ._model._embedder import ImageStates, TokenStates
from ._model._gguf import GGUFInfo
from ._pipeline._ingest import IngestProgress
from ._pipeline._queue import QueuedUpload
from ._pipeline._sources import Discovered, SourceDocument, discover
from ._records import (
    DocumentFile,
    DocumentList,
    DocumentSummary,
    GcReport,
    Hit,
    IngestFailure,
    IngestReport,
    ModeChoice,
    Page,
    PagePayload,
    PageText,
    ReindexReport,
    ReindexSpec,
    Search,
    SearchFilter,
    SearchMode,
    SearchOptions,
    SearchResult,
    Upload,
    VersionInfo,
)
from ._text._snippet import Snippet

__version__ = "0.1.0"

__all__ = [
    "CollectionMismatchError",
    "CollectionNotFoundError",
    "ConfigError",
    "ConflictError",
    "Discovered",
    "DiskFullError",
    "DocumentFile",
    "DocumentList",
    "DocumentSummary",
    "DocvecError",
    "EmbedSettings",
    "Embedder",
    "ForbiddenError",
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
    "ModeChoice",
    "ModelError",
    "ModelFiles",
    "ModelNotFoundError",
    "NotFoundError",
    "Page",
    "PagePayload",
    "PageText",
    "QueuedUpload",
    "ReindexReport",
    "ReindexSpec",
    "RemoteIndex",
    "RenderError",
    "RenderSettings",
    "Reranker",
    "Search",
    "SearchFilter",
    "SearchMode",
    "SearchOptions",
    "SearchResult",
    "Settings",
    "Snippet",
    "SourceDocument",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "TokenStates",
    "TooLargeError",
    "Upload",
    "VersionInfo",
    "__version__",
    "connect",
    "discover",
]

# As httpx does: the public names are docvec's, whichever private module defines them (reprs, docs and
# error messages say docvec.Index, not docvec._index.Index)
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type) or inspect.isfunction(_value):
        _value.__module__ = "docvec"
del _name, _value, inspect
