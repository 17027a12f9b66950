"""Pydantic models of what docvec hands to the outside world (JSON output, later the API and the store)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EmbeddingRecord"]


class EmbeddingRecord(BaseModel):
    """One embedded input, as `docvec embed --json` prints it (a JSON list of these)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["query", "passage", "image"] = Field(description="What was embedded.")
    input: str = Field(description="The text, or the image's path.")
    vector: list[float] = Field(description="The embedding: unit L2 norm, `dim` numbers.")
