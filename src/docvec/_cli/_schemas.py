"""JSON Schemas of docvec's pydantic models, exported under ``schemas/`` (a test keeps them in sync).

python -m docvec._cli._schemas schemas/
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

from .. import _records as records
from .._config import Settings

__all__ = ["SCHEMAS", "render_schemas", "write_schemas"]

#: file name -> the model (or type) whose schema it holds
SCHEMAS: dict[str, Any] = {
    "settings.schema.json": Settings,
    "embed-output.schema.json": list[records.EmbeddingRecord],
    "page-payload.schema.json": records.PagePayload,
    "ingest-report.schema.json": records.IngestReport,
    "search.schema.json": records.Search,
    "search-result.schema.json": records.SearchResult,
    "search-hits.schema.json": list[records.Hit],
    "search-filter.schema.json": records.SearchFilter,
    "page.schema.json": records.Page,
    "reindex-report.schema.json": records.ReindexReport,
    "reindex-spec.schema.json": records.ReindexSpec,
    "versions.schema.json": list[records.VersionInfo],
    "gc-report.schema.json": records.GcReport,
}
#: schemas of what docvec writes rather than reads: fields left out of the JSON are left out here too
_OUTPUTS = frozenset({"search-hits.schema.json", "search-result.schema.json"})


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _api_schemas() -> dict[str, Any]:
    # imported here: generating the other schemas needs no web framework
    from ..api import API_MODELS

    return {f"api-{_kebab(m.__name__)}.schema.json": m for m in API_MODELS}


def render_schemas() -> dict[str, str]:
    """Each schema file's expected text."""
    out = {}
    for name, model in {**SCHEMAS, **_api_schemas()}.items():
        mode: Literal["serialization", "validation"] = "serialization" if name in _OUTPUTS else "validation"
        if isinstance(model, type) and issubclass(model, BaseModel):
            schema = model.model_json_schema(mode=mode)
        else:
            schema = TypeAdapter(model).json_schema(mode=mode)
        if name == "settings.schema.json":
            # defaults that depend on the machine (home folder) are not part of the contract
            for key in ("data_dir", "cache_dir"):
                schema["properties"][key].pop("default", None)
        out[name] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def write_schemas(folder: Path) -> list[Path]:
    """Write every schema into ``folder``; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_schemas().items():
        path = folder / name
        path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover
    for p in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "schemas")):
        print(p)
