"""Shared fixtures: the tiny random-weight models (a Qwen2.5-VL with jina-embeddings-v4's head, a
Qwen3-VL-Embedding and a Qwen3-VL-Reranker), built and converted once per session with the tools users
run (each converted model is a session fixture: conversions are the suite's costliest set-up), the
embedders and the reranker on them, the documents, the Prefect server, the fake Hub, and the browser the
web page is tested in."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from docvec import Embedder, EmbedSettings, ModelFiles, Reranker, Settings
from docvec._tools._convert import convert_checkpoint
from docvec._tools._tiny import build_tiny_model
from docvec._tools._toolchain import LlamaCppSource

from . import fakehub
from .documents import DOCUMENTS, extended_corpus, make_text_pdf
from .helpers import BOOK_PAGES, REPORTED, ROOT, SMALL
from .isolation import Isolation

if TYPE_CHECKING:  # the reference needs PyTorch; tests that do not use it run without
    from playwright.sync_api import Browser, Page

    from docvec_reference.jina_v4 import ReferenceEmbedder
    from docvec_reference.qwen3vl import Qwen3VLReference

# What other processes leave in this home folder (a Prefect profile, a Hugging Face token or cache) must not
# change the suite's verdict: the libraries that keep state there keep this run's under a folder of its own,
# set before any test module imports them.
_HOME = Path(tempfile.mkdtemp(prefix="docvec-tests-home-"))
os.environ["PREFECT_HOME"] = str(_HOME / "prefect")
os.environ["HF_HOME"] = str(_HOME / "huggingface")

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


@pytest.hookimpl(trylast=True)  # after the session fixtures' teardown, which is watched too
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    ISOLATION.stop()
    if ISOLATION.violations and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    # the run's last lines, after pytest's count of passed tests: why it failed if every test passed
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if ISOLATION.violations and terminal is not None:
        terminal.write_sep(
            "!", "FAILED: the suite read outside the repository and its temporary folders", red=True
        )
        for line in ISOLATION.report():
            terminal.write_line(f"  {line}", red=True)


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
def tiny_bf16(
    tiny_dir: Path, llama_source: LlamaCppSource, tmp_path_factory: pytest.TempPathFactory
) -> ModelFiles:
    """The tiny checkpoint converted to BF16 GGUFs (other files, other vectors), once per session."""
    out = tmp_path_factory.mktemp("tiny-bf16")
    return convert_checkpoint(
        tiny_dir / "hf", out, source=llama_source, name="tiny-qwen25vl", outtype="bf16"
    ).main


@pytest.fixture(scope="session")
def tiny_quantized(
    tiny_dir: Path, llama_source: LlamaCppSource, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, ModelFiles]:
    """The tiny checkpoint quantized (Q8_0, Q4_K_M language models beside the F16 mmproj), once per
    session."""
    out = tmp_path_factory.mktemp("tiny-quantized")
    converted = convert_checkpoint(
        tiny_dir / "hf", out, source=llama_source, name="t", outtype="f16", quantize=("Q8_0", "Q4_K_M")
    )
    return converted.quantized


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

    from docvec_reference.jina_v4 import ReferenceEmbedder

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
def small_embedder(tiny_files: ModelFiles) -> Iterator[Embedder]:
    """docvec's embedder on the tiny model at the tests' small page budget (64 image tokens), two threads:
    the one the tests that index pages in process hand to :meth:`docvec.Index.open`."""
    emb = Embedder(tiny_files, EmbedSettings(max_pixels=SMALL, threads=2))
    yield emb
    emb.close()


@pytest.fixture(scope="session")
def qwen3vl_dir(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    """The tiny random-weight Qwen3-VL-Embedding (hf/ checkpoint plus F16 GGUFs), as `docvec models tiny
    --arch qwen3-vl` builds it."""
    out = tmp_path_factory.mktemp("tiny-qwen3vl")
    build_tiny_model(out, cache_dir=cache_dir, outtype="f16", arch="qwen3-vl")
    return out


@pytest.fixture(scope="session")
def qwen3vl_files(qwen3vl_dir: Path) -> ModelFiles:
    return ModelFiles(next(qwen3vl_dir.glob("tiny-*.gguf")), next(qwen3vl_dir.glob("mmproj-*.gguf")))


@pytest.fixture(scope="session")
def qwen3vl_reference(qwen3vl_dir: Path) -> Qwen3VLReference:
    """Qwen3-VL-Embedding's official embedding rules on transformers (fp32) on the tiny checkpoint."""
    import torch

    from docvec_reference.qwen3vl import Qwen3VLReference

    return Qwen3VLReference(qwen3vl_dir / "hf", dtype=torch.float32, threads=2)


@pytest.fixture(scope="session")
def qwen3vl_embedder(qwen3vl_files: ModelFiles) -> Iterator[Embedder]:
    """docvec's embedder on the tiny Qwen3-VL-Embedding, with the profile's defaults (page budget aside:
    the model's own maximum, as the reference uses)."""
    from docvec._model._profiles import QWEN3_VL_EMBEDDING

    emb = Embedder(qwen3vl_files, EmbedSettings(threads=2, max_pixels=QWEN3_VL_EMBEDDING.max_pixels))
    yield emb
    emb.close()


@pytest.fixture(scope="session")
def reranker_dir(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    """The tiny random-weight Qwen3-VL-Reranker (hf/ checkpoint plus F16 GGUFs, the language model
    converted as a reranker), as `docvec models tiny --arch qwen3-vl-reranker` builds it."""
    out = tmp_path_factory.mktemp("tiny-reranker")
    build_tiny_model(out, cache_dir=cache_dir, outtype="f16", arch="qwen3-vl-reranker")
    return out


@pytest.fixture(scope="session")
def reranker(reranker_dir: Path) -> Iterator[Reranker]:
    """docvec's reranker on the tiny model, two threads, the profile's defaults (page budget aside: the
    model's own maximum, as the reference uses)."""
    from docvec._model._profiles import QWEN3_VL_RERANKER

    rr = Reranker.open(reranker_dir, EmbedSettings(threads=2), max_pixels=QWEN3_VL_RERANKER.max_pixels)
    yield rr
    rr.close()


@pytest.fixture(scope="session")
def colqwen3_dir(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    """The tiny random-weight ColQwen3 as `docvec models tiny --arch colqwen3` builds it: a checkpoint as
    colpali-engine saves one (Qwen3-VL's weights and its ``custom_text_proj`` head, the config naming
    ``ColQwen3``) in hf/, converted as `docvec models convert` converts it: F16 GGUFs and the head's file."""
    out = tmp_path_factory.mktemp("tiny-colqwen3")
    build_tiny_model(out, cache_dir=cache_dir, outtype="f16", arch="colqwen3")
    return out


@pytest.fixture(scope="session")
def colqwen35_dir(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    """The tiny random-weight ColQwen3.5 as `docvec models tiny --arch colqwen3.5` builds it: Qwen3.5 (its
    linear-attention layers included) with colpali-engine's head, saved as colpali-engine saves one."""
    out = tmp_path_factory.mktemp("tiny-colqwen35")
    build_tiny_model(out, cache_dir=cache_dir, outtype="f16", arch="colqwen3.5")
    return out


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


@pytest.fixture()
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No Hugging Face Hub: offline mode on, sockets off, no token of the user's (see tests/fakehub.py)."""
    fakehub.go_offline(monkeypatch, tmp_path)


@pytest.fixture()
def fake_hub(offline: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[fakehub.FakeHub]:
    """A Hub on 127.0.0.1, online mode, sockets allowed to loopback only (see tests/fakehub.py)."""
    yield from fakehub.run_fake_hub(monkeypatch)


@pytest.fixture(scope="session")
def documents() -> Path:
    """The real-world PDFs and images kept with the tests (tests/data/documents, SOURCES.md there)."""
    return DOCUMENTS


@pytest.fixture(scope="session")
def book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 117-page PDF of vector text, generated (a long book for streaming, worker and time-limit tests)."""
    return make_text_pdf(tmp_path_factory.mktemp("book") / "book.pdf", BOOK_PAGES)


#: Debian's chromium, and what it needs on a machine with no network and a fresh profile (background
#: fetches fail)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",  # tests run as root in containers
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's chromium, headless, driven by Playwright; one for the session (`make test` installs it:
    without it the tests that use it fail rather than pass unseen)."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        pytest.fail("chromium is not installed: run `make browser` (Debian's chromium package)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser: Browser) -> Iterator[Page]:
    """A page of a fresh browser context (no cookies, no storage), 1200 x 900."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    yield context.new_page()
    context.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if ISOLATION.violations:
        terminalreporter.section("read outside the repository and temporary folders", red=True)
        for line in ISOLATION.report():
            terminalreporter.write_line(line)
        terminalreporter.write_line(
            "a fresh clone has none of these: keep what tests need under tests/ or generate it"
        )
    if REPORTED:
        terminalreporter.section("measured")
        for what, value in REPORTED:
            terminalreporter.write_line(f"{what}: {value:.7f}")
