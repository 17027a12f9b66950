"""Shared fixtures: the tiny random-weight Qwen2.5-VL, built once per session with the tools users run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from PIL import Image

from docvec import Embedder, EmbedSettings, ModelFiles, Settings
from docvec._tools._tiny import build_tiny_model
from docvec._tools._toolchain import LlamaCppSource

from .documents import DOCUMENTS, extended_corpus, make_text_pdf
from .isolation import Isolation

if TYPE_CHECKING:  # the reference needs PyTorch; tests that do not use it run without
    from .reference import ReferenceEmbedder

ROOT = Path(__file__).resolve().parents[1]
#: pages of the generated book (the ``book`` fixture)
BOOK_PAGES = 117

# Watches from here on: collecting the test modules is checked too. The cache folder holds what
# `make setup` put there (the llama-cpp-python source: converter, vocabulary) and the rebuilt tokenizer;
# the extended corpus is read only when DOCVEC_TEST_CORPUS asks for it.
ISOLATION = Isolation(ROOT, extra=(Settings().cache_dir, *filter(None, [extended_corpus()])))
ISOLATION.install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    ISOLATION.current = item.nodeid
    try:
        return (yield)
    finally:
        ISOLATION.current = "session teardown"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if ISOLATION.violations and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture()
def isolation() -> Isolation:
    """The check that the suite reads nothing outside the repository, temporary folders and set-up."""
    return ISOLATION


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    """docvec's cache folder: the unpacked llama-cpp-python source (tools, vocabulary) and tokenizers."""
    return Settings().cache_dir


@pytest.fixture(scope="session")
def llama_source(cache_dir: Path) -> LlamaCppSource:
    """The unpacked llama-cpp-python source (converter, Qwen2 vocabulary and its tokenizer test vectors)."""
    return LlamaCppSource.in_cache(cache_dir)


@pytest.fixture(scope="session")
def tokenizer_cache(cache_dir: Path) -> Path:
    """Where the tokenizer rebuilt from the GGUF vocabulary is kept between sessions."""
    return cache_dir / "tokenizers"


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    """A fresh tiny model folder: hf/ checkpoint plus F16 GGUFs, built and converted at test time."""
    out = tmp_path_factory.mktemp("tiny")
    build_tiny_model(out, cache_dir=cache_dir, outtype="f16")
    return out


@pytest.fixture(scope="session")
def tiny_other_dir(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    """Another tiny model: the same architecture and file names, other weights (seed 1)."""
    out = tmp_path_factory.mktemp("tiny-seed1")
    build_tiny_model(out, cache_dir=cache_dir, seed=1, outtype="f16")
    return out


@pytest.fixture(scope="session")
def tiny_hf(tiny_dir: Path) -> Path:
    """The Hugging Face checkpoint the tiny GGUFs were converted from (seed 0, bfloat16 as jina-v4 is)."""
    return tiny_dir / "hf"


@pytest.fixture(scope="session")
def reference(tiny_hf: Path) -> ReferenceEmbedder:
    """The PyTorch reference (transformers, fp32) on the tiny checkpoint: the parity oracle."""
    import torch

    from .reference import ReferenceEmbedder

    return ReferenceEmbedder(tiny_hf, dtype=torch.float32, threads=2)


@pytest.fixture(scope="session")
def tiny_files(tiny_dir: Path) -> ModelFiles:
    return ModelFiles(next(tiny_dir.glob("tiny-*.gguf")), next(tiny_dir.glob("mmproj-*.gguf")))


@pytest.fixture(scope="session")
def embedder(tiny_files: ModelFiles) -> Iterator[Embedder]:
    emb = Embedder(tiny_files, EmbedSettings(threads=2))
    yield emb
    emb.close()


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One temporary Prefect server for the whole session (it takes 20-40 s to start)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PREFECT_HOME", str(tmp_path_factory.mktemp("prefect")))
    mp.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    mp.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    mp.setenv("DO_NOT_TRACK", "1")
    mp.setenv("PREFECT_LOGGING_LEVEL", "WARNING")
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield
    mp.undo()


@pytest.fixture(scope="session")
def documents() -> Path:
    """The real-world PDFs and images kept with the tests (tests/data/documents, SOURCES.md there)."""
    return DOCUMENTS


@pytest.fixture(scope="session")
def book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 117-page PDF of vector text, generated (a long book for streaming, worker and time-limit tests)."""
    return make_text_pdf(tmp_path_factory.mktemp("book") / "book.pdf", BOOK_PAGES)


def page_image(width: int, height: int, seed: int = 0) -> Image.Image:
    """A deterministic image with structure (gradients, blocks, text-like strokes), not flat colour."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack(
        [(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)), ((x + y) * 3) % 256], axis=-1
    ).astype(np.uint8)
    for _ in range(12):
        x0, y0 = int(rng.integers(0, width)), int(rng.integers(0, height))
        base[y0 : y0 + max(height // 20, 1), x0 : x0 + max(width // 5, 1)] = rng.integers(0, 256, 3)
    return Image.fromarray(base, "RGB")


_REPORT: list[tuple[str, float]] = []


def report(what: str, value: float) -> None:
    """Record a measured number; the run prints them all at the end (parity cosines, for example)."""
    _REPORT.append((what, value))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    ISOLATION.stop()
    if ISOLATION.violations:
        terminalreporter.section("read outside the repository and temporary folders", red=True)
        for line in ISOLATION.report():
            terminalreporter.write_line(line)
        terminalreporter.write_line(
            "a fresh clone has none of these: keep what tests need under tests/ or generate it"
        )
    if _REPORT:
        terminalreporter.section("measured")
        for what, value in _REPORT:
            terminalreporter.write_line(f"{what}: {value:.7f}")
