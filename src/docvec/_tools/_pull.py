"""``docvec models pull``: a registry model's files downloaded from the Hugging Face Hub.

Both GGUF files are fetched with :func:`huggingface_hub.hf_hub_download` into the Hugging Face cache, so a
second pull reuses what is there and an interrupted one resumes (what is pulled:
:mod:`docvec._model._registry`).

A model whose registry entry names a head source also gets its multi-vector head
(:mod:`docvec._model._head`), which the published GGUFs lack: the projector's weights are read out of the full
Hugging Face checkpoint by HTTP Range requests (the safetensors header, then only the projector's bytes,
never the multi-GB shards), the task adapter's LoRA for it is merged in, and the result is written to
docvec's own cache folder, so that a second pull reads nothing.

Every huggingface_hub or network failure is turned into a :class:`~docvec.ToolError` that names the
repository and the file and says what to do.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from huggingface_hub import constants as hf_constants
from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

# public and documented, but huggingface_hub.utils builds __all__ at run time (a lazy loader), which mypy
# cannot read as explicit exports
from huggingface_hub.utils import (  # type: ignore[attr-defined]
    build_hf_headers,
    hf_raise_for_status,
    http_stream_backoff,
)

from .._config import default_cache_dir
from .._errors import ToolError
from .._model._files import ModelFiles
from .._model._head import FILE_NAME as HEAD_FILE_NAME
from .._model._head import write_head
from .._model._registry import RegistryModel, cached_head, get_model, head_root, lm_file, ref_file

__all__ = ["pull"]

logger = logging.getLogger("docvec")


def pull(
    name: str,
    *,
    quant: str | None = None,
    cache_dir: Path | None = None,
    token: str | None = None,
    head: bool = True,
    docvec_cache_dir: Path | None = None,
) -> ModelFiles:
    """Download registry model ``name`` (language model at ``quant`` plus the mmproj) into the HF cache,
    and, when its registry entry has a head source and ``head`` is true, its multi-vector head.

    Files already in the cache are reused after a cheap freshness check, partial downloads are resumed, and
    with ``HF_HUB_OFFLINE=1`` the cache alone is used. ``cache_dir`` is passed to huggingface_hub as its
    cache folder (default: ``HF_HUB_CACHE``, normally ``~/.cache/huggingface/hub``); ``token`` is a
    Hugging Face token (default: ``HF_TOKEN`` or the stored login). The head is read from the full
    checkpoint by byte ranges (see the module docstring) and kept in docvec's cache folder
    ``docvec_cache_dir`` (default ``~/.cache/docvec``); a head already there for the commit the checkpoint's
    revision points at is reused without reading anything.

    Args:
        name: a registry name (see :func:`registry_names`).
        quant: a quantization of the language model (e.g. ``"Q4_K_M"``, case-insensitive); default the
            model's ``default_quant``.
        cache_dir: Hugging Face cache folder to use instead of the default.
        token: Hugging Face access token.
        head: also get the multi-vector head (when the model has one).
        docvec_cache_dir: docvec's cache folder, where the head is written.

    Returns:
        The local paths of the files; ``head`` is ``None`` when it was not asked for or the model has none.

    Raises:
        ModelNotFoundError: unknown ``name`` or ``quant``.
        ToolError: a download failed (offline, no access, file missing on the Hub, disk error, ...), or the
            head could not be built; the GGUFs are in place by then, and the message says so.
    """
    model = get_model(name)
    lm_name = lm_file(model, quant)
    logger.info("pulling %s: %s and %s", model.name, lm_name, model.mmproj_file)
    lm_path = _download(model.lm_repo, lm_name, model.revision, cache_dir, token)
    mmproj_path = _download(model.mmproj_repo, model.mmproj_file, model.revision, cache_dir, token)
    head_path = None
    if head and model.head_repo is not None:
        head_path = _pull_head(model, cache_dir, docvec_cache_dir or default_cache_dir(), token)
    return ModelFiles(language_model=lm_path, mmproj=mmproj_path, head=head_path)


@dataclass(frozen=True)
class _Advice:
    """What a failure message tells the user to do: ``otherwise`` ends every message ("..., or ...");
    ``missing`` is the first step when the Hub has no such file."""

    otherwise: str
    missing: str


# what is left when the Hub is out of reach: files copied in from a machine that has them
_LOCAL_MODEL_HINT = "or copy the model's two GGUF files here and set DOCVEC_MODEL to their folder"
_GGUF_ADVICE = _Advice(otherwise=_LOCAL_MODEL_HINT, missing="Pick another --quant")


def _download(
    repo_id: str,
    filename: str,
    revision: str,
    cache_dir: Path | None,
    token: str | None,
    advice: _Advice = _GGUF_ADVICE,
) -> Path:
    """Download (or reuse from the cache) one file; every failure becomes a :class:`ToolError` that ends
    with ``advice`` on what to do."""
    logger.info("fetching %s from %s (revision %s)", filename, repo_id, revision)
    try:
        local = hf_hub_download(
            repo_id=repo_id,
            filename=filename,
            revision=revision,
            cache_dir=cache_dir,
            token=token,
            library_name="docvec",
        )
    except Exception as exc:  # huggingface_hub, httpx and OS errors: none may escape
        raise ToolError(_failure_message(exc, repo_id, filename, revision, advice)) from exc
    path = Path(str(local))
    logger.info("%s is at %s", filename, path)
    return path


def _failure_message(
    exc: Exception,
    repo_id: str,
    filename: str,
    revision: str,
    advice: _Advice = _GGUF_ADVICE,
    *,
    verb: str = "download",
) -> str:
    """A message for a failed download (or range read: ``verb``) of ``filename`` that names the repository
    and says what to do."""
    what = f"could not {verb} {filename} from https://huggingface.co/{repo_id} (revision {revision})"
    hint = advice.otherwise
    if isinstance(exc, (LocalEntryNotFoundError, OfflineModeIsEnabled)):
        if hf_constants.is_offline_mode():
            return (
                f"{what}: it is not in the Hugging Face cache and offline mode is on (HF_HUB_OFFLINE is "
                f"set). Unset HF_HUB_OFFLINE and check the network, {hint}."
            )
        return (
            f"{what}: the Hugging Face Hub could not be reached and the file is not in the cache. "
            f"Check the network connection (and HTTPS_PROXY if you use a proxy), {hint}."
        )
    if isinstance(exc, GatedRepoError):
        return (
            f"{what}: the repository is gated. Accept its terms at https://huggingface.co/{repo_id} and set "
            f"HF_TOKEN to a token of that account, {hint}."
        )
    if isinstance(exc, RepositoryNotFoundError):
        return (
            f"{what}: the repository was not found or needs authentication (HTTP {_status(exc) or '?'}). "
            f"Set HF_TOKEN if it is private, {hint}."
        )
    if isinstance(exc, RevisionNotFoundError):
        return f"{what}: the revision does not exist in the repository; docvec's registry needs updating."
    if isinstance(exc, RemoteEntryNotFoundError):
        return (
            f"{what}: the repository has no such file (HTTP 404); docvec's registry entry is out of date. "
            f"{advice.missing}, {hint}."
        )
    if isinstance(exc, HfHubHTTPError):
        status = _status(exc)
        if status in (401, 403):
            return f"{what}: access denied (HTTP {status}). Set HF_TOKEN to a valid token, {hint}."
        return (
            f"{what}: the Hub answered HTTP {status or '?'}. Try again later and check the network, {hint}."
        )
    if isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        return (
            f"{what}: {type(exc).__name__}: {exc}. Check free disk space and that the Hugging Face cache "
            f"folder (HF_HUB_CACHE, or the cache folder docvec was given) is writable."
        )
    return (
        f"{what}: {type(exc).__name__}: {exc}. Check the network connection (and HTTPS_PROXY if you use a "
        f"proxy), {hint}."
    )


def _status(exc: HfHubHTTPError) -> int | None:
    """The HTTP status code of ``exc``, if it carries a response."""
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


# --- the multi-vector head ------------------------------------------------------------------------------

#: the head's tensor in the checkpoint (possibly under a prefix), and the module its LoRA names
_PROJECTOR = "multi_vector_projector"
#: Adapter files up to this size are downloaded whole into the HF cache; larger ones are range-read. The
#: whole file costs 2 requests (HEAD, GET) and stays cached; a range read costs 4 (length, header, A, B) and
#: keeps nothing. At a few MB/s a file this small takes about as long either way, while jina-embeddings-v4's
#: adapter (343 MB, all three tasks in one file) holds ~0.4 MB for the head's LoRA: range-read.
_WHOLE_FILE_LIMIT = 8 << 20
#: the safetensors format caps its JSON header at 100 MB: a larger length means this is no safetensors file
_MAX_HEADER = 100_000_000
#: tensors closer than this in one file are fetched in one range (one round trip instead of two)
_MERGE_GAP = 64 << 10

_Array = npt.NDArray[np.float32]


class _HeadError(Exception):
    """The checkpoint is not laid out as docvec expects (a file, tensor or field missing or malformed)."""


class _Readable(Protocol):
    """A file that can be read by byte ranges: a Hub file (HTTP Range) or a downloaded one."""

    name: str

    def read(self, start: int, stop: int) -> bytes:
        """Bytes ``start`` to ``stop`` (exclusive) of the file."""
        ...


@dataclass(frozen=True)
class _TensorSpan:
    """Where one tensor lies in a safetensors file (absolute byte offsets) and how to decode it."""

    dtype: str
    shape: tuple[int, ...]
    start: int
    stop: int


class _LocalFile:
    """A file on disk, read by byte ranges."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name

    def read(self, start: int, stop: int) -> bytes:
        """Bytes ``start`` to ``stop`` (exclusive); short at the end of the file."""
        with self.path.open("rb") as f:
            f.seek(start)
            return f.read(stop - start)


class _HubFile:
    """One file of a Hub repository at a fixed commit, read by HTTP Range requests.

    Each read GETs the file's resolve URL (honouring HF_ENDPOINT) with a ``Range`` header and
    huggingface_hub's headers (token, user agent), through huggingface_hub's shared client with its retries,
    as its HfFileSystem does for seek/read; the Hub redirects to its CDN or Xet bridge, both of which answer
    ranges with 206, and the client drops the token on a redirect off the Hub. Pinning the commit keeps
    every range of every file from one revision even if the branch moves meanwhile.
    """

    def __init__(self, repo_id: str, name: str, commit: str, token: str | None, advice: _Advice) -> None:
        self.repo_id = repo_id
        self.name = name
        self.commit = commit
        self.token = token
        self.advice = advice
        self.url = hf_hub_url(repo_id, name, revision=commit)

    def read(self, start: int, stop: int) -> bytes:
        """Bytes ``start`` to ``stop`` (exclusive); a failure is a :class:`ToolError` naming the file."""
        if stop <= start:
            return b""
        headers = build_hf_headers(token=self.token, library_name="docvec")
        headers["Range"] = f"bytes={start}-{stop - 1}"
        # the bytes as stored: offsets in a compressed body would mean nothing
        headers["Accept-Encoding"] = "identity"
        logger.debug("reading bytes %d-%d of %s", start, stop - 1, self.name)
        try:
            with http_stream_backoff(
                "GET", self.url, headers=headers, timeout=hf_constants.HF_HUB_DOWNLOAD_TIMEOUT
            ) as response:
                hf_raise_for_status(response)
                if response.status_code == 206:
                    data = response.read()
                else:
                    data = _slice_of_whole(response.iter_bytes(), start, stop, self.name)
        except Exception as exc:  # huggingface_hub, httpx and OS errors: none may escape
            raise ToolError(
                _failure_message(exc, self.repo_id, self.name, self.commit, self.advice, verb="read")
            ) from exc
        if len(data) != stop - start:
            raise ToolError(
                f"could not read {self.name} from https://huggingface.co/{self.repo_id} (revision "
                f"{self.commit}): asked for bytes {start}-{stop - 1}, got {len(data)} bytes. Try again "
                f"later, {self.advice.otherwise}."
            )
        return data


def _slice_of_whole(chunks: Any, start: int, stop: int, name: str) -> bytes:
    """Bytes ``start`` to ``stop`` of a response that ignored the Range header and sends the whole file:
    read up to ``stop`` only (the rest of a multi-GB shard is never fetched), keeping nothing before
    ``start``, so memory stays at the size of the slice."""
    logger.warning("the server ignored a Range request for %s: reading the file up to byte %d", name, stop)
    out = bytearray()
    pos = 0
    for chunk in chunks:
        lo, hi = max(start - pos, 0), min(stop - pos, len(chunk))
        if lo < hi:
            out += chunk[lo:hi]
        pos += len(chunk)
        if pos >= stop:
            break
    return bytes(out)


def _write_ref(root: Path, revision: str, commit: str) -> None:
    ref = ref_file(root, revision)
    ref.parent.mkdir(parents=True, exist_ok=True)
    tmp = ref.with_name(f".{ref.name}.tmp")
    tmp.write_text(commit)
    os.replace(tmp, ref)  # a reader never sees half a commit hash


def _head_advice(model: RegistryModel) -> _Advice:
    return _Advice(
        otherwise=(
            f"or go without the multi-vector head: `docvec models pull {model.name} --no-head` (the language "
            f"model and vision encoder are in place; single-vector embeddings work without the head)"
        ),
        missing="docvec needs an update for the checkpoint's new layout",
    )


def _pull_head(
    model: RegistryModel, cache_dir: Path | None, docvec_cache_dir: Path, token: str | None
) -> Path:
    """Get ``model``'s multi-vector head into docvec's cache (or find it there) and return its path."""
    assert model.head_repo is not None
    repo, revision = model.head_repo, model.head_revision
    advice = _head_advice(model)
    root = head_root(model, docvec_cache_dir)
    cached = cached_head(root, revision)
    if hf_constants.is_offline_mode():
        if cached is not None:
            return cached
        raise ToolError(
            f"could not get the multi-vector head of {model.name} from https://huggingface.co/{repo} "
            f"(revision {revision}): it is not in docvec's cache ({root}) and offline mode is on "
            f"(HF_HUB_OFFLINE is set). Unset HF_HUB_OFFLINE and check the network, {advice.otherwise}."
        )
    # The commit the revision points at now: the head is cached under it, and every file is read at it.
    # With a head here already, one quick try, as hf_hub_download does before falling back to its cache.
    try:
        meta = get_hf_file_metadata(
            hf_hub_url(repo, model.head_index, revision=revision),
            token=token,
            library_name="docvec",
            retry_on_errors=cached is None,
        )
    except Exception as exc:  # huggingface_hub, httpx and OS errors: none may escape
        if cached is not None and not isinstance(exc, (RemoteEntryNotFoundError, RevisionNotFoundError)):
            # as hf_hub_download does for a file in its cache: a Hub out of reach leaves the last pull usable
            logger.warning("could not check %s for a newer head (%s); using %s", repo, exc, cached)
            return cached
        raise ToolError(_failure_message(exc, repo, model.head_index, revision, advice)) from exc
    commit = meta.commit_hash
    if commit is None or not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ToolError(
            f"could not get the multi-vector head of {model.name}: https://huggingface.co/{repo} "
            f"(revision {revision}) answered without a commit hash for {model.head_index}, so it is no "
            f"Hugging Face Hub (check HF_ENDPOINT and any proxy), {advice.otherwise}."
        )
    path = root / commit / HEAD_FILE_NAME
    if not path.is_file():
        try:
            weight, bias, source = _fetch_head(model, commit, cache_dir, token, advice)
        except _HeadError as exc:
            raise ToolError(
                f"could not build the multi-vector head of {model.name} from https://huggingface.co/{repo} "
                f"(revision {commit}): {exc}; docvec's registry entry is out of date, {advice.otherwise}."
            ) from None
        try:
            write_head(path, weight, bias, source=source)
        except OSError as exc:
            raise ToolError(
                f"could not write the multi-vector head to {path}: {exc}. Check free disk space and that "
                f"docvec's cache folder (DOCVEC_CACHE_DIR) is writable, {advice.otherwise}."
            ) from exc
        logger.info("multi-vector head of %s written to %s", model.name, path)
    _write_ref(root, revision, commit)
    return path


def _fetch_head(
    model: RegistryModel, commit: str, cache_dir: Path | None, token: str | None, advice: _Advice
) -> tuple[_Array, _Array, str]:
    """Read the base head out of the checkpoint at ``commit`` and merge the adapter's LoRA for it.

    Returns the weight [dim, width], the bias [dim] (float32) and a ``source`` line for the head file.
    """
    assert model.head_repo is not None
    repo = model.head_repo
    index_path = _download(repo, model.head_index, commit, cache_dir, token, advice)
    weight_map = _weight_map(index_path, model.head_index)
    weight_key = _projector_key(weight_map, model.head_index)
    bias_key = weight_key[: -len("weight")] + "bias"
    if bias_key not in weight_map:
        raise _HeadError(f"{model.head_index} names {weight_key} but no {bias_key}")
    base: dict[str, _Array] = {}
    for shard in sorted({weight_map[weight_key], weight_map[bias_key]}):
        wanted = [k for k in (weight_key, bias_key) if weight_map[k] == shard]
        base.update(_read_tensors(_HubFile(repo, shard, commit, token, advice), wanted))
    weight, bias = base[weight_key], base[bias_key]
    if weight.ndim != 2 or bias.shape != (weight.shape[0],):
        raise _HeadError(f"{weight_key} is {list(weight.shape)} and {bias_key} {list(bias.shape)}")
    shards = ", ".join(sorted({weight_map[weight_key], weight_map[bias_key]}))
    where = f"{repo}@{commit}: {weight_key} from {shards}"
    if model.head_adapter is None:
        return weight, bias, f"{where}; no adapter"
    adapter = model.head_adapter.strip("/")
    config_name, tensors_name = f"{adapter}/adapter_config.json", f"{adapter}/adapter_model.safetensors"
    scale, r, alpha = _lora_scale(_download(repo, config_name, commit, cache_dir, token, advice), config_name)
    adapter_file = _open_adapter(repo, tensors_name, commit, cache_dir, token, advice)
    header = _safetensors_header(adapter_file)
    a_key = _lora_key(header, model.head_task, tensors_name)
    if a_key is None:
        # the adapter leaves the head alone (it may fine-tune the decoder only): the base head is the head
        return weight, bias, f"{where}; {tensors_name} has no LoRA for {_PROJECTOR}: base head as is"
    b_key = a_key.replace("lora_A", "lora_B")
    if b_key not in header:
        raise _HeadError(f"{tensors_name} has {a_key} but no {b_key}")
    # PEFT's lora_bias=True gives lora_B a bias of its own, scaled like the product; jina's has none
    b_bias_key = b_key[: -len("weight")] + "bias" if b_key.endswith(".weight") else ""
    keys = [a_key, b_key, *([b_bias_key] if b_bias_key in header else [])]
    lora = _read_tensors(adapter_file, keys, header)
    lora_a, lora_b = lora[a_key], lora[b_key]
    # A is [r, width], B is [dim, r] (PEFT's nn.Linear layout, as W is [dim, width])
    if (
        lora_a.ndim != 2
        or lora_b.ndim != 2
        or lora_a.shape != (r, weight.shape[1])
        or lora_b.shape != (weight.shape[0], r)
    ):
        raise _HeadError(
            f"{tensors_name}: {a_key} is {list(lora_a.shape)} and {b_key} {list(lora_b.shape)}, not "
            f"[{r}, {weight.shape[1]}] and [{weight.shape[0]}, {r}] (r={r} in {config_name}, head "
            f"{list(weight.shape)})"
        )
    merged = weight + np.float32(scale) * (lora_b @ lora_a)
    source = f"{where}; + {a_key}/lora_B of {tensors_name} merged (r={r}, alpha={alpha:g}, scale {scale:g})"
    if b_bias_key in lora:
        if lora[b_bias_key].shape != bias.shape:
            raise _HeadError(
                f"{tensors_name}: {b_bias_key} is {list(lora[b_bias_key].shape)}, not {list(bias.shape)}"
            )
        bias = bias + np.float32(scale) * lora[b_bias_key]
        source += f", with {b_bias_key}"
    return merged, bias, source


def _weight_map(path: Path, name: str) -> dict[str, str]:
    """The ``weight_map`` of a shard index: tensor name -> shard file name."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _HeadError(f"{name} is not readable JSON ({exc})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise _HeadError(f"{name} has no weight_map of tensor names to shard files")
    return weight_map


def _projector_key(weight_map: Mapping[str, str], index_name: str) -> str:
    """The one tensor name that is the head's weight (``multi_vector_projector.weight``, any prefix)."""
    suffix = f"{_PROJECTOR}.weight"
    keys = [k for k in weight_map if k == suffix or k.endswith("." + suffix)]
    if not keys:
        raise _HeadError(f"{index_name} names no tensor ending in {suffix}")
    if len(keys) > 1:
        raise _HeadError(f"{index_name} names {len(keys)} tensors ending in {suffix}: {', '.join(keys)}")
    return keys[0]


def _lora_scale(path: Path, name: str) -> tuple[float, int, float]:
    """The LoRA scale of an adapter_config.json (``lora_alpha / r``, or ``lora_alpha / sqrt(r)`` with
    rsLoRA, as PEFT scales), with ``r`` and ``lora_alpha``."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _HeadError(f"{name} is not readable JSON ({exc})") from None
    r = config.get("r") if isinstance(config, dict) else None
    alpha = config.get("lora_alpha") if isinstance(config, dict) else None
    if not isinstance(r, int) or isinstance(r, bool) or r <= 0:
        raise _HeadError(f"{name} has no positive integer r (the LoRA rank): {r!r}")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        raise _HeadError(f"{name} has no number lora_alpha: {alpha!r}")
    rslora = bool(config.get("use_rslora", False))
    scale = alpha / math.sqrt(r) if rslora else alpha / r
    return scale, r, float(alpha)


def _open_adapter(
    repo: str, name: str, commit: str, cache_dir: Path | None, token: str | None, advice: _Advice
) -> _Readable:
    """The adapter's safetensors: downloaded whole when small (see :data:`_WHOLE_FILE_LIMIT`), else read
    by ranges from the Hub. Its size comes from the Hub's file metadata (a HEAD request)."""
    try:
        size = get_hf_file_metadata(
            hf_hub_url(repo, name, revision=commit), token=token, library_name="docvec", retry_on_errors=True
        ).size
    except Exception as exc:  # huggingface_hub, httpx and OS errors: none may escape
        raise ToolError(_failure_message(exc, repo, name, commit, advice)) from exc
    if size is not None and size <= _WHOLE_FILE_LIMIT:
        return _LocalFile(_download(repo, name, commit, cache_dir, token, advice), name)
    logger.info("%s is %s bytes: reading only the head's LoRA from it", name, size)
    return _HubFile(repo, name, commit, token, advice)


def _lora_key(header: Mapping[str, _TensorSpan], task: str, name: str) -> str | None:
    """The head's ``lora_A`` tensor for ``task`` in an adapter's header; ``None`` when it has none.

    A multi-task adapter (jina's) names the task right after ``lora_A``
    (``...multi_vector_projector.lora_A.retrieval.weight``); a single-task one does not
    (``...multi_vector_projector.lora_A.weight``), and then its one LoRA is taken.
    """

    def after_lora_a(key: str) -> list[str]:
        parts = key.split(".")
        return parts[parts.index("lora_A") + 1 :]

    found = [k for k in header if _PROJECTOR in k.split(".") and "lora_A" in k.split(".")]
    if not found:
        return None
    for_task = [k for k in found if task in after_lora_a(k)]
    if len(for_task) == 1:
        return for_task[0]
    if not for_task and len(found) == 1 and after_lora_a(found[0]) == ["weight"]:
        return found[0]
    raise _HeadError(
        f"{name} has no single LoRA for {_PROJECTOR} and task {task!r}: it has {', '.join(sorted(found))}"
    )


def _safetensors_header(file: _Readable) -> dict[str, _TensorSpan]:
    """The tensors of a safetensors file, from its header (an 8-byte little-endian length, then JSON)."""
    head = file.read(0, 8)
    if len(head) != 8:
        raise _HeadError(f"{file.name} is shorter than a safetensors header")
    (length,) = struct.unpack("<Q", head)
    if not 2 <= length <= _MAX_HEADER:
        raise _HeadError(f"{file.name} is not a safetensors file (header length {length})")
    raw = file.read(8, 8 + length)
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise _HeadError(f"{file.name} has a corrupt safetensors header ({exc})") from None
    if not isinstance(header, dict):
        raise _HeadError(f"{file.name} has a corrupt safetensors header (not a JSON object)")
    spans: dict[str, _TensorSpan] = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        try:
            begin, end = (int(x) for x in entry["data_offsets"])
            spans[key] = _TensorSpan(
                str(entry["dtype"]),
                tuple(int(n) for n in entry["shape"]),
                8 + length + begin,
                8 + length + end,
            )
        except (KeyError, TypeError, ValueError):
            raise _HeadError(f"{file.name}: the header entry of {key} is malformed") from None
    return spans


def _read_tensors(
    file: _Readable, keys: list[str], header: Mapping[str, _TensorSpan] | None = None
) -> dict[str, _Array]:
    """Tensors ``keys`` of a safetensors file as float32, reading only their bytes (neighbours closer than
    :data:`_MERGE_GAP` in one range)."""
    spans = header if header is not None else _safetensors_header(file)
    missing = [k for k in keys if k not in spans]
    if missing:
        raise _HeadError(f"{file.name} has no tensor {', '.join(missing)}")
    ordered = sorted(keys, key=lambda k: spans[k].start)
    out: dict[str, _Array] = {}
    group: list[str] = []
    for key in [*ordered, ""]:
        if group and (not key or spans[key].start - spans[group[-1]].stop > _MERGE_GAP):
            lo, hi = spans[group[0]].start, max(spans[k].stop for k in group)
            data = file.read(lo, hi)
            for k in group:
                out[k] = _decode(spans[k], data[spans[k].start - lo : spans[k].stop - lo], k, file.name)
            group = []
        if key:
            group.append(key)
    return out


def _decode(span: _TensorSpan, data: bytes, key: str, name: str) -> _Array:
    """A safetensors tensor (BF16, F16 or F32, little-endian) as float32. BF16 is the upper 16 bits of a
    float32, so widening it is a shift, exact."""
    count = math.prod(span.shape)
    if span.dtype == "BF16":
        raw = np.frombuffer(data, dtype="<u2")
        values = (raw.astype(np.uint32) << 16).view(np.float32)
    elif span.dtype == "F16":
        values = np.frombuffer(data, dtype="<f2").astype(np.float32)
    elif span.dtype == "F32":
        values = np.frombuffer(data, dtype="<f4").astype(np.float32)
    else:
        raise _HeadError(f"{name}: {key} is {span.dtype}; docvec reads BF16, F16 and F32")
    if values.size != count:
        raise _HeadError(
            f"{name}: {key} holds {len(data)} bytes, not the {count} values of {list(span.shape)}"
        )
    return values.reshape(span.shape)
