"""Session fixtures for tests of docvec.tiny and docvec.reference.

Test modules load them with ``pytest_plugins = ["tests._tiny_fixtures"]``. The checkpoint is built once per
session in a pytest temporary folder; the rebuilt tokenizer is cached under docvec's cache folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from docvec.config import Settings
from docvec.toolchain import LlamaCppSource


@pytest.fixture(scope="session")
def llama_source() -> LlamaCppSource:
    """The unpacked llama-cpp-python source (converter, Qwen2 vocabulary and its tokenizer test vectors)."""
    return LlamaCppSource.in_cache(Settings().cache_dir)


@pytest.fixture(scope="session")
def tokenizer_cache() -> Path:
    """Where the tokenizer rebuilt from the GGUF vocabulary is kept between sessions."""
    return Settings().cache_dir / "tokenizers"


@pytest.fixture(scope="session")
def tiny_hf(
    tmp_path_factory: pytest.TempPathFactory, llama_source: LlamaCppSource, tokenizer_cache: Path
) -> Path:
    """The tiny random-weight Qwen2.5-VL checkpoint folder, seed 0, float32."""
    from docvec.tiny import build_checkpoint

    out = tmp_path_factory.mktemp("tiny-hf") / "hf"
    return build_checkpoint(out, llama_source.qwen2_vocab, seed=0, cache_dir=tokenizer_cache)


@pytest.fixture(scope="session")
def reference(tiny_hf: Path) -> object:
    """A :class:`docvec.reference.ReferenceEmbedder` on the tiny checkpoint."""
    from docvec.reference import ReferenceEmbedder

    return ReferenceEmbedder(tiny_hf, threads=2)
