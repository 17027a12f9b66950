"""Settings from the environment and .env, the exported JSON Schemas, the public surface, the pin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import docvec
from docvec.config import Settings
from docvec.schemas import render_schemas
from docvec.toolchain import LLAMA_CPP_PYTHON_VERSION

ROOT = Path(__file__).resolve().parents[1]


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCVEC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCVEC_MODEL", "/models/jina")
    monkeypatch.setenv("DOCVEC_EMBED__DIM", "512")
    monkeypatch.setenv("DOCVEC_EMBED__THREADS", "3")
    s = Settings()
    assert s.data_dir == tmp_path / "data" and s.model == "/models/jina"
    assert s.embed.dim == 512 and s.embed.threads == 3


def test_settings_from_dotenv_and_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for k in ("DOCVEC_MODEL", "DOCVEC_DATA_DIR", "DOCVEC_EMBED__DIM"):
        monkeypatch.delenv(k, raising=False)
    (tmp_path / ".env").write_text("DOCVEC_MODEL=from-dotenv\nDOCVEC_EMBED__DIM=256\n")
    assert Settings().model == "from-dotenv" and Settings().embed.dim == 256
    monkeypatch.setenv("DOCVEC_MODEL", "from-env")
    assert Settings().model == "from-env"


def test_bad_settings_say_what_is_wrong(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCVEC_EMBED__DIM", "300")
    with pytest.raises(ValueError, match="dim must be one of 128, 256, 512, 1024, 2048, not 300"):
        Settings()


@pytest.mark.parametrize("name", sorted(render_schemas()))
def test_schemas_are_in_sync(name: str) -> None:
    path = ROOT / "schemas" / name
    assert path.is_file(), f"{path} is missing: run `make schemas`"
    assert path.read_text() == render_schemas()[name], f"{path} is stale: run `make schemas`"
    json.loads(path.read_text())


def test_no_stray_schema_files() -> None:
    assert sorted(p.name for p in (ROOT / "schemas").glob("*.json")) == sorted(render_schemas())


def test_public_surface_is_pinned() -> None:
    assert sorted(docvec.__all__) == [
        "BackendError",
        "ConfigError",
        "DocvecError",
        "EmbedSettings",
        "Embedder",
        "InputError",
        "ModelError",
        "ModelFileError",
        "ModelFiles",
        "ModelMismatchError",
        "ModelNotFoundError",
        "Settings",
        "ToolError",
    ]
    for name in docvec.__all__:
        assert getattr(docvec, name).__module__.startswith("docvec.")
    assert all(
        issubclass(getattr(docvec, n), docvec.DocvecError) for n in docvec.__all__ if n.endswith("Error")
    )


def test_toolchain_pin_matches_the_build_script() -> None:
    pin = dict(
        line.split("=", 1)
        for line in (ROOT / "llama.cpp" / "pin.env").read_text().splitlines()
        if "=" in line
    )
    assert pin["LLAMA_CPP_PYTHON_VERSION"] == LLAMA_CPP_PYTHON_VERSION
    import importlib.metadata

    assert importlib.metadata.version("llama_cpp_python") == LLAMA_CPP_PYTHON_VERSION
