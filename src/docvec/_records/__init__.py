"""What docvec hands to the outside world and reads from it, as pydantic models: the stored page payload,
the ingest report, search hits and filters, document summaries, embedding records. Also the rules their
fields follow (document ids, tags, ``k``), each defined once (``_rules``).

JSON Schemas of these models are exported under ``schemas/`` (``make schemas``).
"""

from ._documents import DocumentList, DocumentSummary, Upload
from ._pages import (
    EmbeddingInfo,
    EmbeddingRecord,
    IngestFailure,
    IngestReport,
    ModelFingerprint,
    PagePayload,
    PageText,
)
from ._rules import (
    DOC_ID_PATTERN,
    MAX_K,
    MAX_PREFETCH,
    MAX_RERANK,
    QUERY_PATTERN,
    TAG_KEY_PATTERN,
    TAG_PATTERN,
    TAG_VALUE_PATTERN,
    JsonBool,
    JsonInt,
    check_k,
    check_prefetch,
    check_query,
    check_rerank,
    counted,
    display_name,
    parse_tag,
    parse_tags,
    rerank_depth,
    shortened,
    tag_dict,
)
from ._search import FILTER_KEYS, Hit, SearchFilter, SearchMode
from ._versions import GcReport, ReindexReport, ReindexSpec, TextIndex, VersionInfo, VersionRecord

__all__ = [
    "DOC_ID_PATTERN",
    "FILTER_KEYS",
    "MAX_K",
    "MAX_PREFETCH",
    "MAX_RERANK",
    "QUERY_PATTERN",
    "TAG_KEY_PATTERN",
    "TAG_PATTERN",
    "TAG_VALUE_PATTERN",
    "DocumentList",
    "DocumentSummary",
    "EmbeddingInfo",
    "EmbeddingRecord",
    "GcReport",
    "Hit",
    "IngestFailure",
    "IngestReport",
    "JsonBool",
    "JsonInt",
    "ModelFingerprint",
    "PagePayload",
    "PageText",
    "ReindexReport",
    "ReindexSpec",
    "SearchFilter",
    "SearchMode",
    "TextIndex",
    "Upload",
    "VersionInfo",
    "VersionRecord",
    "check_k",
    "check_prefetch",
    "check_query",
    "check_rerank",
    "counted",
    "display_name",
    "parse_tag",
    "parse_tags",
    "rerank_depth",
    "shortened",
    "tag_dict",
]

#: A document id: the first 32 hex digits of its file's SHA-256.
