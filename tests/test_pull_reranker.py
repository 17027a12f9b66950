"""`docvec models pull qwen3-vl-reranker-2b`: the official checkpoint downloaded with huggingface_hub and
converted here as a reranker (rank pooling, the head's answer rows as its classifier), found by name offline
afterwards; and how a checkpoint folder is told for a reranker's. No network: the Hugging Face cache is
filled with the tiny reranker's checkpoint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from docvec import EmbedSettings, Reranker
from docvec._model import _registry as registry
from docvec._model._gguf import read_gguf_info
from docvec._tools._convert import is_reranker_checkpoint
from docvec._tools._pull import pull

from .fakehub import fill_cache

pytestmark = pytest.mark.usefixtures("offline")

NAME = "qwen3-vl-reranker-2b"
MODEL = registry.REGISTRY[NAME]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
HF_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "preprocessor_config.json")


def test_the_registry_names_both_rerankers() -> None:
    for name in (NAME, "qwen3-vl-reranker-8b"):
        m = registry.get_model(name)
        assert m.kind == "reranker" and m.profile == "qwen3-vl-reranker"
        assert m.checkpoint_repo == f"Qwen/Qwen3-VL-Reranker-{name[-2:].upper()}"
        assert "Apache-2.0" in registry.licence_notice(name) and "Reranker" in registry.licence_notice(name)


def test_a_reranker_checkpoint_is_told_by_its_name_or_its_cards_title(tmp_path: Path) -> None:
    named = tmp_path / "Qwen3-VL-Reranker-2B"
    named.mkdir()
    assert is_reranker_checkpoint(named)
    card = tmp_path / "snapshot"
    card.mkdir()
    assert not is_reranker_checkpoint(card)
    (card / "README.md").write_text(
        "---\nlicense: apache-2.0\n---\n# Qwen3-VL-Reranker-2B\n\n## Highlights\n"
    )
    assert is_reranker_checkpoint(card)
    # the embedding model's card names the reranker in later headings: its title decides
    (card / "README.md").write_text("# Qwen3-VL-Embedding-2B\n\n## Qwen3-VL-Reranker\n# Qwen3-VL-Reranker\n")
    assert not is_reranker_checkpoint(card)
    # and a card outweighs a folder's name
    (named / "README.md").write_text("# Qwen3-VL-Embedding-2B\n")
    assert not is_reranker_checkpoint(named)


@pytest.fixture()
def docvec_cache(tmp_path: Path, llama_source: object, cache_dir: Path) -> Path:
    own = tmp_path / "docvec-cache"
    (own / "llama-cpp-python").mkdir(parents=True)
    for v in (cache_dir / "llama-cpp-python").iterdir():
        (own / "llama-cpp-python" / v.name).symlink_to(v)
    return own


def test_pull_converts_the_checkpoint_as_a_reranker(
    tmp_path: Path, reranker_dir: Path, reranker: Reranker, docvec_cache: Path
) -> None:
    hf = reranker_dir / "hf"
    files = {f: (hf / f).read_bytes() for f in HF_FILES}
    files["model.safetensors"] = (hf / "model.safetensors").read_bytes()
    hf_cache = tmp_path / "hf-cache"
    fill_cache(hf_cache, MODEL.lm_repo, files, commit=COMMIT)  # a snapshot folder named by its commit

    pulled = pull(NAME, quant="F16", cache_dir=hf_cache, docvec_cache_dir=docvec_cache, threads=2)
    info = read_gguf_info(pulled.language_model)
    assert info.is_reranker, "converted as an embedding model: the reranker's classifier is missing"
    assert pulled.language_model.is_relative_to(docvec_cache / "models" / NAME / COMMIT)
    # the same scores as the tiny reranker converted directly (both F16 of the same checkpoint)
    page = Image.fromarray(np.full((320, 320, 3), 180, np.uint8))
    with Reranker(pulled, EmbedSettings(threads=2)) as ours:
        assert np.allclose(ours.score("total", [page]), reranker.score("total", [page]), atol=1e-6)


def test_models_convert_makes_a_reranker_when_told_or_when_the_card_says_so(
    tmp_path: Path, reranker_dir: Path, cache_dir: Path
) -> None:
    from typer.testing import CliRunner

    from docvec._cli import app

    env = {"DOCVEC_CACHE_DIR": str(cache_dir), "COLUMNS": "200"}
    hf = reranker_dir / "hf"  # a folder named "hf", no card: an embedding model unless told
    plain = CliRunner().invoke(
        app, ["models", "convert", str(hf), str(tmp_path / "plain"), "--outtype", "f16"], env=env
    )
    assert plain.exit_code == 0, plain.output
    assert not read_gguf_info(next((tmp_path / "plain").glob("hf-F16.gguf"))).is_reranker
    told = CliRunner().invoke(
        app, ["models", "convert", str(hf), str(tmp_path / "told"), "--outtype", "f16", "--reranker"], env=env
    )
    assert told.exit_code == 0, told.output
    assert "DOCVEC_RERANK_MODEL=" in told.output
    assert read_gguf_info(next((tmp_path / "told").glob("hf-F16.gguf"))).is_reranker
