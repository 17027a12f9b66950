"""docvec._tools._pull without a network: huggingface_hub resolves files from a Hugging Face cache built in
tmp_path.

Every test runs with offline mode on (HF_HUB_OFFLINE and huggingface_hub's constant, which it reads at
import) and with sockets disabled, so a test that would reach the Hub fails at once instead of hanging.
The multi-vector head tests instead start a fake Hub on 127.0.0.1 (HF_ENDPOINT pointed at it, sockets
allowed to loopback only) that answers huggingface_hub's HEAD and GET requests, Range requests included,
so the real download and range-read code runs against real safetensors files and counts what it sends.
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import pytest
from huggingface_hub import constants as hf_constants
from huggingface_hub import try_to_load_from_cache
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
)

from docvec import DocvecError, ModelNotFoundError
from docvec._errors import ToolError
from docvec._model import _registry as registry
from docvec._model._head import read_head
from docvec._tools import _pull as pulling

from .fakehub import (
    ADAPTER,
    ADAPTER_CONFIG,
    ALPHA,
    B_KEY,
    COMMIT,
    COMMIT2,
    DIM,
    GGUFS,
    HEAD_REPO,
    INDEX,
    LM_DEFAULT,
    LM_Q4,
    MMPROJ,
    MODEL,
    RANK,
    SHARDS,
    W_KEY,
    WIDTH,
    FakeHub,
    build_checkpoint,
    fake_gguf,
    fill_cache,
    head_source,
    header_length,
    pull_head,
    serve,
)

pytestmark = pytest.mark.usefixtures("offline")

# --- registry -----------------------------------------------------------------------------------------


def test_registry_names() -> None:
    assert registry.registry_names() == [
        "jina-v4",
        "qwen3-vl-embedding-2b",
        "qwen3-vl-embedding-8b",
        "qwen3-vl-reranker-2b",
        "qwen3-vl-reranker-8b",
        "tomoro-colqwen3-4b",
        "tomoro-colqwen3-8b",
        "vultron-core-4.5b",
        "vultron-flash-0.8b",
        "vultron-prime-8b",
    ]
    assert registry.get_model("JINA-V4") is MODEL


def test_registry_entry_matches_published_repository_and_names() -> None:
    """Names as published by Jina AI: <base>-<QUANT>.gguf in the text-retrieval GGUF repo (see
    docvec._model._registry)."""
    assert MODEL.lm_repo == "jinaai/jina-embeddings-v4-text-retrieval-GGUF"
    assert MODEL.mmproj_repo == "jinaai/jina-embeddings-v4-text-retrieval-GGUF"
    assert MODEL.mmproj_file == "mmproj-jina-embeddings-v4-retrieval-BF16.gguf"
    assert MODEL.revision == "main"
    assert MODEL.default_quant == "Q8_0"
    for q in ("F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M"):  # the six the model card lists by name
        assert q in MODEL.lm_files
    pattern = re.compile(
        r"jina-embeddings-v4-text-retrieval-(F16|Q\d_K(_[SM])?|Q8_0|IQ\d_(XXS|XS|NL|S|M))\.gguf"
    )
    for q, filename in MODEL.lm_files.items():
        m = pattern.fullmatch(filename)
        assert m is not None, filename
        assert m.group(1) == q
    assert MODEL.lm_files["Q4_K_M"] == "jina-embeddings-v4-text-retrieval-Q4_K_M.gguf"


def test_registry_model_is_frozen_and_hashable() -> None:
    with pytest.raises(AttributeError):
        MODEL.default_quant = "F16"  # type: ignore[misc]
    with pytest.raises(TypeError):
        MODEL.lm_files["F32"] = "x.gguf"  # type: ignore[index]
    assert hash(MODEL) == hash(registry.REGISTRY["jina-v4"])


def test_licence_notice_says_non_commercial() -> None:
    text = registry.licence_notice("jina-v4")
    assert "CC BY-NC 4.0" in text
    assert "NON-COMMERCIAL" in text.upper()
    assert MODEL.licence_id == "CC-BY-NC-4.0"
    assert MODEL.homepage in text


# --- pull from a pre-filled cache ---------------------------------------------------------------------


def test_pull_returns_cached_paths_with_content(tmp_path: Path) -> None:
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_DEFAULT: fake_gguf("lm"), MMPROJ: fake_gguf("mmproj")})
    files = pulling.pull("jina-v4", cache_dir=tmp_path, head=False)
    assert files.language_model == paths[LM_DEFAULT]
    assert files.mmproj == paths[MMPROJ]
    assert files.language_model.read_bytes() == fake_gguf("lm")
    assert files.mmproj.read_bytes() == fake_gguf("mmproj")


def test_another_quant_is_a_model_folder_of_its_own(tmp_path: Path) -> None:
    """The registry name opens the default quantization; another one comes back as a folder (the cached
    files linked in, not copied) that a model setting can name, made once."""
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_Q4: fake_gguf("lm"), MMPROJ: fake_gguf("mmproj")})
    docvec_cache = tmp_path / "docvec"
    files = pulling.pull(
        "jina-v4", quant="Q4_K_M", cache_dir=tmp_path, head=False, docvec_cache_dir=docvec_cache
    )
    commit = paths[LM_Q4].parent.name
    folder = docvec_cache / "models" / "jina-v4" / commit / "Q4_K_M"
    assert files == registry.ModelFiles(folder / LM_Q4, folder / MMPROJ)
    assert sorted(p.name for p in folder.iterdir()) == sorted([LM_Q4, MMPROJ])
    assert files.language_model.samefile(paths[LM_Q4]) and files.mmproj.samefile(paths[MMPROJ])
    assert not list(folder.parent.glob(".*"))  # no part folder left
    assert (
        pulling.pull("jina-v4", quant="q4_k_m", cache_dir=tmp_path, head=False, docvec_cache_dir=docvec_cache)
        == files
    )


def test_pull_default_quant_picks_default_file(tmp_path: Path) -> None:
    fill_cache(tmp_path, MODEL.lm_repo, {LM_DEFAULT: fake_gguf("q8"), MMPROJ: fake_gguf("mmproj")})
    files = pulling.pull("jina-v4", cache_dir=tmp_path, head=False)
    assert files.language_model.name == "jina-embeddings-v4-text-retrieval-Q8_0.gguf"
    assert files.language_model.read_bytes() == fake_gguf("q8")


def test_pull_quant_is_case_insensitive(tmp_path: Path) -> None:
    fill_cache(tmp_path, MODEL.lm_repo, {LM_DEFAULT: fake_gguf("lm"), MMPROJ: fake_gguf("mmproj")})
    assert (
        pulling.pull("jina-v4", quant="q8_0", cache_dir=tmp_path, head=False).language_model.name
        == LM_DEFAULT
    )


def test_pull_uses_default_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path))
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_DEFAULT: fake_gguf("q8"), MMPROJ: fake_gguf("mmproj")})
    assert pulling.pull("jina-v4", head=False) == registry.ModelFiles(paths[LM_DEFAULT], paths[MMPROJ])
    assert registry.find_cached("jina-v4") == registry.ModelFiles(paths[LM_DEFAULT], paths[MMPROJ])


def test_pull_offline_miss_names_repo_and_file(tmp_path: Path) -> None:
    fill_cache(tmp_path, MODEL.lm_repo, {LM_Q4: fake_gguf("lm")})  # mmproj missing
    with pytest.raises(ToolError) as info:
        pulling.pull("jina-v4", quant="Q4_K_M", cache_dir=tmp_path)
    message = str(info.value)
    assert MODEL.mmproj_repo in message
    assert MMPROJ in message
    assert "HF_HUB_OFFLINE" in message
    assert "DOCVEC_MODEL" in message
    assert type(info.value) is ToolError


def test_pull_offline_empty_cache_names_language_model(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as info:
        pulling.pull("jina-v4", quant="Q6_K", cache_dir=tmp_path)
    assert MODEL.lm_repo in str(info.value)
    assert MODEL.lm_files["Q6_K"] in str(info.value)


def test_pull_passes_arguments_to_huggingface_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    def fake_download(**kwargs: Any) -> str:
        calls.append(kwargs)
        return str(tmp_path / kwargs["filename"])

    monkeypatch.setattr(pulling, "hf_hub_download", fake_download)
    files = pulling.pull("jina-v4", cache_dir=tmp_path, token="hf_secret", head=False)
    assert [c["filename"] for c in calls] == [LM_DEFAULT, MMPROJ]
    for c in calls:
        assert c["repo_id"] == MODEL.lm_repo
        assert c["revision"] == "main"
        assert c["cache_dir"] == tmp_path
        assert c["token"] == "hf_secret"
    assert files == registry.ModelFiles(tmp_path / LM_DEFAULT, tmp_path / MMPROJ)


# --- errors from huggingface_hub become ToolError -----------------------------------------------------


def _response(status: int) -> httpx2.Response:
    return httpx2.Response(status, request=httpx2.Request("HEAD", "https://huggingface.co/x/resolve/main/y"))


@pytest.mark.parametrize(
    ("error", "offline_mode", "expected"),
    [
        (LocalEntryNotFoundError("not cached"), True, "HF_HUB_OFFLINE"),
        (LocalEntryNotFoundError("not cached"), False, "network"),
        (GatedRepoError("gated", response=_response(403)), False, "HF_TOKEN"),
        (RepositoryNotFoundError("nope", response=_response(401)), False, "HF_TOKEN"),
        (RemoteEntryNotFoundError("404", response=_response(404)), False, "no such file"),
        (HfHubHTTPError("unauthorised", response=_response(401)), False, "HF_TOKEN"),
        (HfHubHTTPError("server", response=_response(503)), False, "HTTP 503"),
        (OSError(errno.ENOSPC, "No space left on device"), False, "disk space"),
        (httpx2.ConnectError("connection refused"), False, "network"),
        (RuntimeError("anything else"), False, "network"),
    ],
)
def test_download_errors_become_tool_errors(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    offline_mode: bool,
    expected: str,
) -> None:
    def failing_download(**kwargs: Any) -> str:
        raise error

    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", offline_mode)
    monkeypatch.setattr(pulling, "hf_hub_download", failing_download)
    monkeypatch.setattr(pulling, "_hub_reachable", lambda: True)  # the Hub answers; its downloads fail
    with pytest.raises(DocvecError) as info:
        pulling.pull("jina-v4", quant="Q4_K_M", cache_dir=tmp_path)
    assert type(info.value) is ToolError
    assert info.value.__cause__ is error
    message = str(info.value)
    assert MODEL.lm_repo in message
    assert LM_Q4 in message
    assert expected in message


# --- unknown names ------------------------------------------------------------------------------------


def test_unknown_name_lists_choices(tmp_path: Path) -> None:
    calls: tuple[Callable[[], object], ...] = (
        lambda: pulling.pull("jina-v9", cache_dir=tmp_path),
        lambda: registry.find_cached("jina-v9", cache_dir=tmp_path),
        lambda: registry.licence_notice("jina-v9"),
    )
    for call in calls:
        with pytest.raises(ModelNotFoundError, match="jina-v4"):
            call()


def test_unknown_quant_lists_choices(tmp_path: Path) -> None:
    calls: tuple[Callable[[], object], ...] = (
        lambda: pulling.pull("jina-v4", quant="Q4_0", cache_dir=tmp_path),
        lambda: registry.find_cached("jina-v4", quant="Q4_0", cache_dir=tmp_path),
    )
    for call in calls:
        with pytest.raises(ModelNotFoundError) as info:
            call()
        assert "Q4_0" in str(info.value)
        assert "Q4_K_M" in str(info.value)
        assert "Q8_0" in str(info.value)


# --- find_cached --------------------------------------------------------------------------------------


@pytest.fixture
def no_download(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(**kwargs: Any) -> str:
        raise AssertionError("find_cached must not call hf_hub_download")

    monkeypatch.setattr(pulling, "hf_hub_download", forbidden)


@pytest.mark.usefixtures("no_download")
def test_find_cached_returns_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)  # works without offline mode too
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_Q4: fake_gguf("lm"), MMPROJ: fake_gguf("mmproj")})
    found = registry.find_cached("jina-v4", quant="Q4_K_M", cache_dir=tmp_path)
    assert found == registry.ModelFiles(paths[LM_Q4], paths[MMPROJ])
    assert found.language_model.read_bytes() == fake_gguf("lm")


@pytest.mark.usefixtures("no_download")
@pytest.mark.parametrize("present", [[LM_Q4], [MMPROJ], [LM_DEFAULT, MMPROJ]])
def test_find_cached_none_when_a_file_is_missing(tmp_path: Path, present: list[str]) -> None:
    fill_cache(tmp_path, MODEL.lm_repo, {name: fake_gguf(name) for name in present})
    assert registry.find_cached("jina-v4", quant="Q4_K_M", cache_dir=tmp_path) is None


@pytest.mark.usefixtures("no_download")
def test_find_cached_none_for_empty_or_missing_cache(tmp_path: Path) -> None:
    assert registry.find_cached("jina-v4", cache_dir=tmp_path) is None
    assert registry.find_cached("jina-v4", cache_dir=tmp_path / "does-not-exist") is None


@pytest.mark.usefixtures("no_download")
def test_find_cached_none_when_blob_was_deleted(tmp_path: Path) -> None:
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_Q4: fake_gguf("lm"), MMPROJ: fake_gguf("mmproj")})
    if not paths[MMPROJ].is_symlink():
        pytest.skip("needs symlinks")
    paths[MMPROJ].resolve().unlink()
    assert registry.find_cached("jina-v4", quant="Q4_K_M", cache_dir=tmp_path) is None


@pytest.mark.usefixtures("no_download")
def test_find_cached_default_quant(tmp_path: Path) -> None:
    paths = fill_cache(tmp_path, MODEL.lm_repo, {LM_DEFAULT: fake_gguf("q8"), MMPROJ: fake_gguf("mmproj")})
    found = registry.find_cached("jina-v4", cache_dir=tmp_path)
    assert found is not None
    assert found.language_model == paths[LM_DEFAULT]


# --- the multi-vector head, from a fake Hub on loopback ---------------------------------------------------


def test_registry_entry_names_the_head_source() -> None:
    """The full checkpoint and its one multi-task adapter folder (the sources: docvec._model._registry)."""
    assert MODEL.head_repo == "jinaai/jina-embeddings-v4"
    assert MODEL.head_index == "model.safetensors.index.json"
    assert MODEL.head_adapter == "adapters"
    assert MODEL.head_task == "retrieval"
    assert MODEL.head_revision == "main"


def test_pull_merges_the_head_from_byte_ranges(fake_hub: FakeHub, tmp_path: Path) -> None:
    ck = build_checkpoint()
    serve(fake_hub, ck)
    files = pull_head(tmp_path)
    assert files.head == tmp_path / "docvec" / "models" / "jina-v4" / COMMIT / "multivector-head.gguf"
    head = read_head(files.head, width=WIDTH)
    np.testing.assert_allclose(head.weight, ck.merged("retrieval"), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(head.bias, ck.bias)  # LoRA leaves the bias alone
    for other in ("text-matching", "code"):
        assert not np.allclose(head.weight, ck.merged(other), atol=1e-4)
    assert not np.allclose(head.weight, ck.weight, atol=1e-4)
    source = head_source(files.head)
    assert COMMIT in source and "lora_A.retrieval" in source and "r=8, alpha=16" in source
    # the GGUFs came too, into the HF cache
    assert files.language_model.read_bytes() == GGUFS[LM_DEFAULT]

    # only the header and the projector's bytes of the shard that holds it; nothing of the other
    shard = ck.files[SHARDS[1]]
    projector_bytes = 2 * (DIM * WIDTH + DIM)
    assert fake_hub.sent[f"{HEAD_REPO}/{SHARDS[0]}"] == 0
    assert fake_hub.sent[f"{HEAD_REPO}/{SHARDS[1]}"] == 8 + header_length(shard) + projector_bytes
    assert fake_hub.sent[f"{HEAD_REPO}/{SHARDS[1]}"] < len(shard) / 20
    # and of the large adapter, the header and the retrieval LoRA of the projector (plus at most a small gap)
    adapter = ck.files[ADAPTER]
    lora_bytes = 2 * (RANK * WIDTH + DIM * RANK)
    floor = 8 + header_length(adapter) + lora_bytes
    assert floor <= fake_hub.sent[f"{HEAD_REPO}/{ADAPTER}"] <= floor + (64 << 10)
    assert fake_hub.sent[f"{HEAD_REPO}/{ADAPTER}"] < len(adapter) / 20
    for name in (SHARDS[1], ADAPTER):
        ranges = fake_hub.gets(f"{HEAD_REPO}/{name}")
        assert ranges and all(r is not None and r.startswith("bytes=") for r in ranges)
    # these four files were read, each at the commit "main" resolved to (never at "main" itself)
    head_gets = [(n, rev) for m, n, _, rev in fake_hub.asked_of(HEAD_REPO) if m == "GET"]
    read = {f"{HEAD_REPO}/{n}" for n in (INDEX, SHARDS[1], ADAPTER_CONFIG, ADAPTER)}
    assert {n for n, _ in head_gets} == read
    assert {rev for _, rev in head_gets} == {COMMIT}


def test_second_pull_reads_nothing_and_find_registered_has_the_head(
    fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(fake_hub, build_checkpoint())
    first = pull_head(tmp_path)
    fake_hub.sent.clear()
    fake_hub.requests.clear()
    again = pull_head(tmp_path)
    assert again == first
    assert sum(fake_hub.sent.values()) == 0
    assert {q[0] for q in fake_hub.requests} == {"HEAD"}  # freshness checks only

    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    found = registry.find_registered("jina-v4", cache_dir=tmp_path / "docvec")
    assert found == first and found is not None and found.head is not None
    assert read_head(found.head).dim == DIM
    # a docvec cache without a pulled head (a pull from before heads, or --no-head): head None, GGUFs found
    older = registry.find_registered("jina-v4", cache_dir=tmp_path / "other")
    assert older == registry.ModelFiles(first.language_model, first.mmproj)

    # offline, the same files come from the two caches
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    fake_hub.requests.clear()
    assert pull_head(tmp_path) == first
    assert fake_hub.requests == []


def test_pull_with_the_hub_out_of_reach_reuses_the_head(fake_hub: FakeHub, tmp_path: Path) -> None:
    serve(fake_hub, build_checkpoint())
    first = pull_head(tmp_path)
    fake_hub.stop()  # connections are refused from now on
    assert pull_head(tmp_path) == first


def test_a_new_commit_gets_a_new_head(
    fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(fake_hub, build_checkpoint(seed=0))
    first = pull_head(tmp_path)
    newer = build_checkpoint(seed=1)
    serve(fake_hub, newer)
    fake_hub.commit = COMMIT2
    second = pull_head(tmp_path)
    assert second.head == tmp_path / "docvec" / "models" / "jina-v4" / COMMIT2 / "multivector-head.gguf"
    np.testing.assert_allclose(read_head(second.head).weight, newer.merged(), rtol=1e-6, atol=1e-7)
    assert first.head is not None and first.head.is_file()  # the older one is left alone
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    found = registry.find_cached("jina-v4", docvec_cache_dir=tmp_path / "docvec")
    assert found is not None and found.head == second.head


def test_no_head_asks_nothing_of_the_checkpoint(fake_hub: FakeHub, tmp_path: Path) -> None:
    serve(fake_hub, build_checkpoint())
    files = pull_head(tmp_path, head=False)
    assert files.head is None
    assert files.language_model.read_bytes() == GGUFS[LM_DEFAULT]
    assert fake_hub.asked_of(HEAD_REPO) == []
    assert not (tmp_path / "docvec" / "models" / "jina-v4").exists()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_head_tensors_of_each_float_type(fake_hub: FakeHub, tmp_path: Path, dtype: str) -> None:
    ck = build_checkpoint(dtype=dtype)
    serve(fake_hub, ck)
    head = read_head(pull_head(tmp_path).head or Path("missing"))
    np.testing.assert_allclose(head.weight, ck.merged(), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(head.bias, ck.bias)


def test_small_adapter_is_downloaded_whole_into_the_hf_cache(fake_hub: FakeHub, tmp_path: Path) -> None:
    ck = build_checkpoint(adapter_filler_mb=0)
    assert len(ck.files[ADAPTER]) < 1 << 20
    serve(fake_hub, ck)
    files = pull_head(tmp_path)
    np.testing.assert_allclose(
        read_head(files.head).weight if files.head else None, ck.merged(), rtol=1e-6, atol=1e-7
    )
    assert fake_hub.gets(f"{HEAD_REPO}/{ADAPTER}") == [None]  # one plain GET
    assert fake_hub.sent[f"{HEAD_REPO}/{ADAPTER}"] == len(ck.files[ADAPTER])
    cached = try_to_load_from_cache(HEAD_REPO, ADAPTER, cache_dir=tmp_path / "hf", revision=COMMIT)
    assert isinstance(cached, str) and Path(cached).read_bytes() == ck.files[ADAPTER]


def test_single_task_adapter(fake_hub: FakeHub, tmp_path: Path) -> None:
    """An adapter for one task (no task segment in its names, as in an adapters/<task>/ layout)."""
    ck = build_checkpoint(tasks=("retrieval",), single_task=True)
    serve(fake_hub, ck)
    head = read_head(pull_head(tmp_path).head or Path("missing"))
    np.testing.assert_allclose(head.weight, ck.merged(), rtol=1e-6, atol=1e-7)


def test_lora_bias_is_merged_into_the_bias(fake_hub: FakeHub, tmp_path: Path) -> None:
    ck = build_checkpoint(lora_bias=True)
    serve(fake_hub, ck)
    files = pull_head(tmp_path)
    assert files.head is not None
    head = read_head(files.head)
    np.testing.assert_allclose(head.weight, ck.merged(), rtol=1e-6, atol=1e-7)
    expected = ck.bias + np.float32(ALPHA / RANK) * ck.lora_bias["retrieval"]
    np.testing.assert_allclose(head.bias, expected, rtol=1e-6, atol=1e-7)


def test_adapter_without_projector_lora_gives_the_base_head(fake_hub: FakeHub, tmp_path: Path) -> None:
    ck = build_checkpoint(projector_lora=False)
    serve(fake_hub, ck)
    files = pull_head(tmp_path)
    assert files.head is not None
    np.testing.assert_array_equal(read_head(files.head).weight, ck.weight)
    assert "base head as is" in head_source(files.head)


def test_server_ignoring_range_still_gives_the_head(
    fake_hub: FakeHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ck = build_checkpoint()
    serve(fake_hub, ck)
    fake_hub.honour_range = False
    with caplog.at_level("WARNING", logger="docvec"):
        files = pull_head(tmp_path)
    np.testing.assert_allclose(
        read_head(files.head).weight if files.head else None, ck.merged(), rtol=1e-6, atol=1e-7
    )
    assert "ignored a Range request" in caplog.text


def _pull_fails(tmp_path: Path) -> str:
    with pytest.raises(ToolError) as info:
        pull_head(tmp_path)
    assert type(info.value) is ToolError
    message = str(info.value)
    assert HEAD_REPO in message and "--no-head" in message
    # the GGUFs are in place before the head is tried, and no head or ref is left behind
    assert isinstance(try_to_load_from_cache(MODEL.lm_repo, LM_DEFAULT, cache_dir=tmp_path / "hf"), str)
    assert not list((tmp_path / "docvec").rglob("*.gguf"))
    assert not (tmp_path / "docvec" / "models" / "jina-v4" / "refs").exists()
    return message


def test_missing_index_says_which_file(fake_hub: FakeHub, tmp_path: Path) -> None:
    ck = build_checkpoint()
    del ck.files[INDEX]
    serve(fake_hub, ck)
    message = _pull_fails(tmp_path)
    assert INDEX in message and "404" in message


def _serve_with_index(fake_hub: FakeHub, edit: Callable[[dict[str, Any]], None]) -> None:
    """Serve the checkpoint with its safetensors index (``model.safetensors.index.json``) changed by
    ``edit``."""
    ck = build_checkpoint()
    index = json.loads(ck.files[INDEX])
    edit(index)
    ck.files[INDEX] = json.dumps(index).encode()
    serve(fake_hub, ck)


def test_index_without_the_projector(fake_hub: FakeHub, tmp_path: Path) -> None:
    def drop(index: dict[str, Any]) -> None:
        del index["weight_map"][W_KEY], index["weight_map"][B_KEY]

    _serve_with_index(fake_hub, drop)
    message = _pull_fails(tmp_path)
    assert (
        f"{INDEX}: no tensor is the multi-vector head's weight ({W_KEY} or custom_text_proj.weight" in message
    )


def test_shard_without_the_projector(fake_hub: FakeHub, tmp_path: Path) -> None:
    def misplace(index: dict[str, Any]) -> None:  # the index is wrong
        index["weight_map"][W_KEY] = index["weight_map"][B_KEY] = SHARDS[0]

    _serve_with_index(fake_hub, misplace)
    assert f"{SHARDS[0]} has no tensor {W_KEY}" in _pull_fails(tmp_path)


@pytest.mark.parametrize("missing", [ADAPTER_CONFIG, ADAPTER])
def test_missing_adapter_says_which_file(fake_hub: FakeHub, tmp_path: Path, missing: str) -> None:
    ck = build_checkpoint()
    del ck.files[missing]
    serve(fake_hub, ck)
    message = _pull_fails(tmp_path)
    assert missing in message and "404" in message


def test_adapter_without_the_task(fake_hub: FakeHub, tmp_path: Path) -> None:
    serve(fake_hub, build_checkpoint(tasks=("text-matching", "code")))
    message = _pull_fails(tmp_path)
    assert "'retrieval'" in message and "multi_vector_projector.lora_A.code.weight" in message


def test_adapter_of_another_rank(fake_hub: FakeHub, tmp_path: Path) -> None:
    ck = build_checkpoint()
    ck.files[ADAPTER_CONFIG] = json.dumps({"r": RANK * 2, "lora_alpha": ALPHA}).encode()
    serve(fake_hub, ck)
    message = _pull_fails(tmp_path)
    assert f"r={RANK * 2} in {ADAPTER_CONFIG}" in message


def test_offline_pull_without_a_head_says_what_to_do(tmp_path: Path) -> None:
    fill_cache(tmp_path / "hf", MODEL.lm_repo, GGUFS)
    with pytest.raises(ToolError) as info:
        pull_head(tmp_path)
    message = str(info.value)
    assert HEAD_REPO in message and "HF_HUB_OFFLINE" in message and "--no-head" in message
    assert pull_head(tmp_path, head=False).head is None  # what the message offers works


def test_cli_pull_gets_and_shows_the_head(fake_hub: FakeHub, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from docvec._cli import app

    serve(fake_hub, build_checkpoint())
    env = {"DOCVEC_CACHE_DIR": str(tmp_path / "docvec")}
    hf = ["--hf-cache", str(tmp_path / "hf")]
    r = CliRunner().invoke(app, ["models", "pull", "jina-v4", *hf], env=env)
    assert r.exit_code == 0, r.output
    head = tmp_path / "docvec" / "models" / "jina-v4" / COMMIT / "multivector-head.gguf"
    assert "head" in r.stdout and str(head) in "".join(r.stdout.split())
    assert read_head(head).dim == DIM
    fake_hub.requests.clear()
    r = CliRunner().invoke(app, ["models", "pull", "jina-v4", "--no-head", *hf], env=env)
    assert r.exit_code == 0, r.output
    assert "head " not in r.stdout
    assert fake_hub.asked_of(HEAD_REPO) == []


def test_cli_pull_with_a_q8_0_vision_encoder(tmp_path: Path, tiny_bf16: registry.ModelFiles) -> None:
    """`docvec models pull jina-v4 --mmproj q8_0`: Jina publishes only a BF16 mmproj, so docvec quantizes
    it (as the converter would) into a model folder beside the linked language model, and says to use
    that folder, which then embeds."""
    from gguf import GGUFReader
    from typer.testing import CliRunner

    from docvec._cli import app

    paths = fill_cache(
        tmp_path / "hf",
        MODEL.lm_repo,
        {LM_DEFAULT: tiny_bf16.language_model.read_bytes(), MMPROJ: tiny_bf16.mmproj.read_bytes()},
    )
    env = {"DOCVEC_CACHE_DIR": str(tmp_path / "docvec"), "COLUMNS": "300"}
    args = ["models", "pull", "jina-v4", "--mmproj", "q8_0", "--no-head", "--hf-cache", str(tmp_path / "hf")]
    r = CliRunner().invoke(app, args, env=env)
    assert r.exit_code == 0, r.output
    folder = tmp_path / "docvec" / "models" / "jina-v4" / paths[LM_DEFAULT].parent.name / "Q8_0-mmproj-Q8_0"
    assert f"DOCVEC_MODEL={folder} " in r.output
    mmproj = folder / "mmproj-jina-embeddings-v4-retrieval-Q8_0.gguf"
    assert "Q8_0" in {t.tensor_type.name for t in GGUFReader(mmproj).tensors}
    assert (folder / LM_DEFAULT).samefile(paths[LM_DEFAULT])
    embedded = CliRunner().invoke(
        app, ["embed", "--model", str(folder), "-i", str(_page(tmp_path)), "--json"], env=env
    )
    assert embedded.exit_code == 0, embedded.output


def _page(tmp_path: Path) -> Path:
    from PIL import Image

    path = tmp_path / "page.png"
    Image.new("RGB", (280, 280), (200, 180, 90)).save(path)
    return path


def test_a_hub_out_of_reach_reads_the_cache_only_and_says_where_to_copy_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Refused:  # this suite's sockets are off: the session the probe uses, refused as by no network
        def head(self, url: str, **kwargs: Any) -> None:
            raise httpx2.ConnectError("connection refused")

    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(pulling, "get_session", Refused)
    asked: list[dict[str, Any]] = []
    real = pulling.hf_hub_download

    def recorded(**kwargs: Any) -> str:
        asked.append(kwargs)
        return str(real(**kwargs))

    monkeypatch.setattr(pulling, "hf_hub_download", recorded)
    with pytest.raises(ToolError) as info:
        pulling.pull("jina-v4", cache_dir=tmp_path / "hf", docvec_cache_dir=tmp_path / "docvec")
    # one look at the Hub, then the cache alone (no retries per file)
    assert [a["local_files_only"] for a in asked] == [True]
    folder = tmp_path / "docvec" / "models" / "jina-v4-copied"
    message = " ".join(str(info.value).split())
    assert "could not be reached" in message and f"into {folder} and set DOCVEC_MODEL={folder}" in message
    assert f"copy {LM_DEFAULT} and {MMPROJ} from a machine that has them" in message
