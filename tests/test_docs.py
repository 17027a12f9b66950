"""The pages of docs/ that are written from docvec's own models (docs/settings.md from the settings model)
are in sync with them, and say every setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

from docvec import Settings
from docvec._cli._docs import render_docs, render_settings

from .helpers import ROOT


@pytest.mark.parametrize("name", sorted(render_docs()))
def test_generated_pages_are_in_sync(name: str) -> None:
    path = ROOT / "docs" / name
    assert path.is_file(), f"{path} is missing: run `make docs`"
    assert path.read_text(encoding="utf-8") == render_docs()[name], f"{path} is stale: run `make docs`"


def _variables() -> list[str]:
    names = []
    for name, info in Settings.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseSettings):
            names += [f"DOCVEC_{name.upper()}__{sub.upper()}" for sub in kind.model_fields]
        else:
            names.append(f"DOCVEC_{name.upper()}")
    return names


def test_every_setting_is_on_the_page_with_a_description() -> None:
    page = render_settings()
    rows = {line.split("|")[1].strip(" `"): line for line in page.splitlines() if line.startswith("| `")}
    assert set(rows) == set(_variables())
    assert "DOCVEC_LOG_LEVEL" in rows and "DOCVEC_EMBED__DIM" in rows and "DOCVEC_RENDER__WORKERS" in rows
    for variable, row in rows.items():
        description = row.rstrip(" |").rsplit("|", 1)[1].strip()
        assert description, f"{variable} has no description: give its field one in src/docvec/_config.py"


def test_defaults_that_depend_on_the_machine_are_written_with_a_tilde() -> None:
    page = render_settings()
    assert "| `~/.local/share/docvec` |" in page and "| `~/.cache/docvec` |" in page
    assert str(Path.home()) not in page
