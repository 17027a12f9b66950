"""``docvec models pull``: a registry model's files downloaded from the Hugging Face Hub.

Both GGUF files are fetched with :func:`huggingface_hub.hf_hub_download` into the Hugging Face cache, so a
second pull reuses what is there and an interrupted one resumes (what is pulled:
:mod:`docvec._model._registry`).

A model whose registry entry names a head source also gets its multi-vector head
(:mod:`docvec._model._head`), which the published GGUFs lack: the projector's weights are read out of the full
Hugging Face checkpoint by HTTP Range requests (the safetensors header, then only the projector's bytes,
never the multi-GB shards), the task adapter's LoRA for it is merged in (both as ``docvec models convert``
does for a local checkpoint: :mod:`docvec._tools._safetensors`), and the result is written to docvec's own
cache folder, so that a second pull reads nothing.

Every huggingface_hub or network failure is turned into a :class:`~docvec._errors.ToolError` that names the
repository and the file and says what to do.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    get_session,
    hf_raise_for_status,
    http_stream_backoff,
)

from .._config import default_cache_dir
from .._errors import CheckpointError, ModelNotFoundError, ToolError
from .._model._files import ModelFiles
from .._model._head import FILE_NAME as HEAD_FILE_NAME
from .._model._head import write_head
from .._model._registry import (
    RegistryModel,
    cached_head,
    get_model,
    lm_file,
    model_root,
    quant_key,
    ref_file,
)
from ._safetensors import (
    Header,
    LocalFile,
    Readable,
    build_head,
    find_head_tensors,
    read_header,
    read_weight_map,
)

__all__ = ["MMPROJ_TYPES", "pull"]

logger = logging.getLogger("docvec")


#: the vision-encoder types ``pull`` offers beside the published (or converted) one
MMPROJ_TYPES = ("Q8_0",)


def pull(
    name: str,
    *,
    quant: str | None = None,
    mmproj: str | None = None,
    cache_dir: Path | None = None,
    token: str | None = None,
    head: bool = True,
    docvec_cache_dir: Path | None = None,
    threads: int | None = None,
) -> ModelFiles:
    """Download registry model ``name`` (language model at ``quant`` plus the mmproj) into the HF cache,
    and, when its registry entry has a head source and ``head`` is true, its multi-vector head.

    A model published as a checkpoint only (``checkpoint_repo`` in its entry) is downloaded as one (its
    config, tokenizer, processor config and safetensors weights, into the HF cache) and converted with the
    pinned llama.cpp converter into docvec's cache folder, under the commit its revision resolved to; the
    conversion is done once per commit and quantization (``threads`` for the quantizer).

    Anything but the default quantization and vision encoder is returned as a model folder of its own in
    docvec's cache, ``<cache>/models/<name>/<commit>/<quant>[-mmproj-<type>]/`` (the files linked in, the
    quantized mmproj written there), which a model setting can name; ``mmproj="Q8_0"`` quantizes the
    vision encoder (:func:`docvec._tools._mmproj_quant.quantize_mmproj`).

    Files already in the cache are reused after a cheap freshness check, partial downloads are resumed, and
    with ``HF_HUB_OFFLINE=1`` the cache alone is used. ``cache_dir`` is passed to huggingface_hub as its
    cache folder (default: ``HF_HUB_CACHE``, normally ``~/.cache/huggingface/hub``); ``token`` is a
    Hugging Face token (default: ``HF_TOKEN`` or the stored login). The head is read from the full
    checkpoint by byte ranges (see the module docstring) and kept in docvec's cache folder
    ``docvec_cache_dir`` (default ``~/.cache/docvec``); a head already there for the commit the checkpoint's
    revision points at is reused without reading anything.

    Args:
        name: a registry name (see :func:`docvec._model._registry.registry_names`).
        quant: a quantization of the language model (e.g. ``"Q4_K_M"``, case-insensitive); default the
            model's ``default_quant``.
        mmproj: ``"Q8_0"`` for a Q8_0 vision encoder (case-insensitive); default the published type.
        cache_dir: Hugging Face cache folder to use instead of the default.
        token: Hugging Face access token.
        head: also get the multi-vector head (when the model has one).
        docvec_cache_dir: docvec's cache folder, where the head is written.

    Returns:
        The local paths of the files; ``head`` is ``None`` when it was not asked for or the model has none.

    Raises:
        ModelNotFoundError: unknown ``name``, ``quant`` or ``mmproj``.
        ToolError: a download failed (offline, no access, file missing on the Hub, disk error, ...), or the
            head could not be built; the GGUFs are in place by then, and the message says so.
    """
    model = get_model(name)
    key = quant_key(model, quant)
    mm_type = _mmproj_type(model, mmproj)
    docvec_cache_dir = docvec_cache_dir or default_cache_dir()
    if model.checkpoint_repo is not None:
        files, commit = _pull_checkpoint(model, key, cache_dir, token, docvec_cache_dir, threads=threads)
    else:
        assert model.mmproj_file is not None  # a published GGUF pair
        # One quick look at the Hub first: out of reach, the cache alone is read, at once, instead of each
        # file retrying for half a minute before it says the same.
        offline = hf_constants.is_offline_mode() or not _hub_reachable()
        lm_name = lm_file(model, key)
        logger.info("pulling %s: %s and %s", model.name, lm_name, model.mmproj_file)
        folder = docvec_cache_dir / "models" / f"{model.name}-copied"
        advice = _Advice(
            otherwise=(
                f"or copy {lm_name} and {model.mmproj_file} from a machine that has them into {folder} and "
                f"set DOCVEC_MODEL={folder}"
            ),
            missing="Pick another --quant",
        )
        lm_path = _download(model.lm_repo, lm_name, model.revision, cache_dir, token, advice, offline=offline)
        mmproj_path = _download(
            model.mmproj_repo, model.mmproj_file, model.revision, cache_dir, token, advice, offline=offline
        )
        head_path = None
        if head and model.head_repo is not None:
            head_path = _pull_head(model, cache_dir, docvec_cache_dir, token, offline=offline)
        files = ModelFiles(language_model=lm_path, mmproj=mmproj_path, head=head_path)
        commit = lm_path.parent.name  # the HF cache's snapshots/<commit>/
    if key == model.default_quant and mm_type is None:
        return files  # what the registry name opens
    label = key if mm_type is None else f"{key}-mmproj-{mm_type}"
    return _model_folder(files, model_root(model, docvec_cache_dir) / commit / label, mm_type)


def _mmproj_type(model: RegistryModel, mmproj: str | None) -> str | None:
    if mmproj is None:
        return None
    wanted = mmproj.strip().upper()
    if wanted not in MMPROJ_TYPES:
        raise ModelNotFoundError(
            f"{model.name} has no vision-encoder type {mmproj!r}: choose {', '.join(MMPROJ_TYPES)} "
            "(or leave it out for the published one)"
        )
    return wanted


def _model_folder(files: ModelFiles, folder: Path, mmproj_type: str | None) -> ModelFiles:
    """A model folder holding ``files`` (linked in) and, for ``mmproj_type``, the vision encoder quantized
    to it; made once (in a ``.part`` folder renamed when complete), found afterwards."""
    from ._mmproj_quant import quantize_mmproj

    mm_name = files.mmproj.name
    if mmproj_type is not None:
        stem = re.sub(r"-(F16|BF16|F32)$", "", files.mmproj.stem, flags=re.IGNORECASE)
        mm_name = f"{stem}-{mmproj_type}.gguf"
    made = ModelFiles(
        folder / files.language_model.name,
        folder / mm_name,
        None if files.head is None else folder / HEAD_FILE_NAME,
    )
    if all(p is None or p.is_file() for p in (made.language_model, made.mmproj, made.head)):
        return made
    part = folder.with_name(f".{folder.name}.part")
    try:
        if part.exists():
            shutil.rmtree(part)
        part.mkdir(parents=True)
        _link_in(files.language_model, part / made.language_model.name)
        if files.head is not None:
            _link_in(files.head, part / HEAD_FILE_NAME)
        if mmproj_type is None:
            _link_in(files.mmproj, part / mm_name)
        else:
            logger.info("quantizing the vision encoder %s to %s", files.mmproj.name, mmproj_type)
            quantize_mmproj(files.mmproj, part / mm_name)
        if folder.exists():
            shutil.rmtree(folder)  # an older, incomplete one
        part.rename(folder)
    except OSError as exc:
        shutil.rmtree(part, ignore_errors=True)
        raise ToolError(
            f"could not make the model folder {folder}: {exc}. Check free disk space and that docvec's "
            "cache folder (DOCVEC_CACHE_DIR) is writable."
        ) from exc
    return made


def _link_in(src: Path, dst: Path) -> None:
    """``dst`` as a hard link to the file behind ``src`` (a Hugging Face cache entry is a symlink to its
    blob), or a symbolic link across file systems: never a copy of gigabytes."""
    target = src.resolve()
    try:
        os.link(target, dst)
    except OSError:
        dst.symlink_to(target)


#: what the converter reads of a checkpoint (the weights are found from the index, or model.safetensors)
_CHECKPOINT_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "preprocessor_config.json")
_INDEX = "model.safetensors.index.json"


def _pull_checkpoint(
    model: RegistryModel,
    key: str,
    cache_dir: Path | None,
    token: str | None,
    docvec_cache_dir: Path,
    *,
    threads: int | None,
) -> tuple[ModelFiles, str]:
    """The converted files of ``model`` at quantization ``key``, and the commit they were converted from."""
    from .._model._registry import find_converted
    from ._convert import convert_checkpoint, default_outtype
    from ._toolchain import LlamaCppSource

    assert model.checkpoint_repo is not None
    repo, rev = model.checkpoint_repo, model.revision
    lm_name, conversion = model.lm_files[key], model.conversions[key]
    advice = _Advice(
        otherwise=f"or convert a copy of {repo} yourself: `docvec models convert HF_DIR OUT_DIR`, then set "
        "DOCVEC_MODEL to OUT_DIR",
        missing=f"Check that {repo} at revision {rev} still has it",
    )
    logger.info("pulling %s: the checkpoint %s (revision %s), to convert here", model.name, repo, rev)
    config = _download(repo, "config.json", rev, cache_dir, token, advice)
    snapshot = config.parent  # the HF cache's snapshots/<commit>/ folder
    commit = snapshot.name
    root = model_root(model, docvec_cache_dir)
    done = find_converted(model, lm_name, docvec_cache_dir)
    if done is not None and done.language_model.parent.is_relative_to(root / commit):
        return done, commit
    for f in _CHECKPOINT_FILES[1:]:
        _download(repo, f, rev, cache_dir, token, advice)
    try:
        index = _download(repo, _INDEX, rev, cache_dir, token, advice)
    except ToolError:  # a revision with one model.safetensors has no index
        shards = ["model.safetensors"]
    else:
        try:
            shards = list(dict.fromkeys(read_weight_map(index, f"{repo}/{_INDEX}").values()))
        except CheckpointError as e:
            raise ToolError(str(e)) from None
    for shard in shards:
        _download(repo, shard, rev, cache_dir, token, advice)
    out = root / commit
    logger.info("converting %s at %s into %s", repo, commit, out)
    convert_checkpoint(
        snapshot,
        out,
        source=LlamaCppSource.in_cache(docvec_cache_dir),
        name=model.name,
        outtype=conversion.outtype or default_outtype(),  # type: ignore[arg-type]
        quantize=() if conversion.quantize is None else (conversion.quantize,),
        threads=threads,
        reranker=model.kind == "reranker",
    )
    _write_ref(root, rev, commit)
    found = find_converted(model, lm_name, docvec_cache_dir)
    if found is None:
        raise ToolError(f"converting {repo} at {commit} into {out} did not give {lm_name}")
    return found, commit


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
    *,
    offline: bool = False,
) -> Path:
    """Download (or reuse from the cache) one file; every failure becomes a :class:`ToolError` that ends
    with ``advice`` on what to do. ``offline``: the Hub is out of reach, only the cache is read."""
    logger.info("fetching %s from %s (revision %s)", filename, repo_id, revision)
    try:
        local = hf_hub_download(
            repo_id=repo_id,
            filename=filename,
            revision=revision,
            cache_dir=cache_dir,
            token=token,
            library_name="docvec",
            local_files_only=offline,
        )
    except Exception as exc:  # huggingface_hub, httpx and OS errors: none may escape
        raise ToolError(_failure_message(exc, repo_id, filename, revision, advice)) from exc
    path = Path(str(local))
    logger.info("%s is at %s", filename, path)
    return path


def _hub_reachable() -> bool:
    """Whether the Hub answers at all (any HTTP status will do), in a few seconds and without retries."""
    try:
        get_session().head(hf_constants.ENDPOINT, timeout=_PROBE_TIMEOUT_S)
    except Exception as exc:  # httpx's transport errors, OS errors: out of reach either way
        logger.info(
            "the Hugging Face Hub at %s is out of reach (%s): reading the cache only",
            hf_constants.ENDPOINT,
            exc,
        )
        return False
    return True


#: how long a look at the Hub may take before docvec reads its cache only
_PROBE_TIMEOUT_S = 5.0


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

#: Adapter files up to this size are downloaded whole into the HF cache; larger ones are range-read. The
#: whole file costs 2 requests (HEAD, GET) and stays cached; a range read costs 4 (length, header, A, B) and
#: keeps nothing. At a few MB/s a file this small takes about as long either way, while jina-embeddings-v4's
#: adapter (343 MB, all three tasks in one file) holds ~0.4 MB for the head's LoRA: range-read.
_WHOLE_FILE_LIMIT = 8 << 20

_Array = npt.NDArray[np.float32]


class _HubFile:
    """One file of a Hub repository at a fixed commit, read by HTTP Range requests.

    Each read GETs the file's resolve URL (honouring HF_ENDPOINT) with a ``Range`` header and
    huggingface_hub's headers (token, user agent), through huggingface_hub's shared client with its retries,
    as its HfFileSystem does for seek/read; the Hub redirects to its CDN or Xet bridge, both of which answer
    ranges with 206, and the client drops the token on a redirect off the Hub. Pinning the commit keeps
    every range of every file from one revision even if the branch moves meanwhile.

    Not through HfFileSystem itself: its files ask the Hub's API for the repository, the revision and the
    size before they read, and take a server's whole answer into memory when it ignores the Range header (a
    shard of several GB); this reads exactly the bytes asked for, and only up to ``stop`` then
    (:func:`_slice_of_whole`).
    """

    def __init__(self, repo_id: str, name: str, commit: str, token: str | None, advice: _Advice) -> None:
        self.repo_id = repo_id
        self.name = name
        self.commit = commit
        self.token = token
        self.advice = advice
        self.url = hf_hub_url(repo_id, name, revision=commit)
        #: the file's length, from the first answer (Content-Range, or the Content-Length of a whole file)
        self.size: int | None = None

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
                    total = response.headers.get("Content-Range", "").rpartition("/")[2]
                    data = response.read()
                else:
                    total = response.headers.get("Content-Length", "")
                    data = _slice_of_whole(response.iter_bytes(), start, stop, self.name)
                if total.isdigit():
                    self.size = int(total)
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
    model: RegistryModel,
    cache_dir: Path | None,
    docvec_cache_dir: Path,
    token: str | None,
    *,
    offline: bool = False,
) -> Path:
    """Get ``model``'s multi-vector head into docvec's cache (or find it there) and return its path."""
    assert model.head_repo is not None
    repo, revision = model.head_repo, model.head_revision
    advice = _head_advice(model)
    root = model_root(model, docvec_cache_dir)
    cached = cached_head(root, revision)
    if offline and not hf_constants.is_offline_mode():
        if cached is not None:
            return cached
        raise ToolError(
            f"could not get the multi-vector head of {model.name} from https://huggingface.co/{repo} "
            f"(revision {revision}): the Hugging Face Hub could not be reached and it is not in docvec's "
            f"cache ({root}). Check the network connection (and HTTPS_PROXY if you use a proxy), "
            f"{advice.otherwise}."
        )
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
            weight, bias, source, kind = _fetch_head(model, commit, cache_dir, token, advice)
        except CheckpointError as exc:
            raise ToolError(
                f"could not build the multi-vector head of {model.name} from https://huggingface.co/{repo} "
                f"(revision {commit}): {exc}; docvec's registry entry is out of date, {advice.otherwise}."
            ) from None
        try:
            write_head(path, weight, bias, source=source, kind=kind)
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
) -> tuple[_Array, _Array, str, str | None]:
    """Read the base head out of the checkpoint at ``commit`` and merge the adapter's LoRA for it.

    The tensors the index lists and the adapter's are sorted as :mod:`docvec._tools._safetensors` sorts a
    local checkpoint's; only the headers and the head's bytes are read. Returns the weight [dim, width], the
    bias [dim] (float32), a ``source`` line for the head file and its kind.
    """
    assert model.head_repo is not None
    repo = model.head_repo
    index_path = _download(repo, model.head_index, commit, cache_dir, token, advice)
    entries = [(shard, key) for key, shard in read_weight_map(index_path, model.head_index).items()]
    headers: dict[str, Header] = {}
    adapter = None
    if model.head_adapter is not None:
        adapter = f"{model.head_adapter.strip('/')}/adapter_model.safetensors"
        headers[adapter] = read_header(_open_adapter(repo, adapter, commit, cache_dir, token, advice))
        entries += [(adapter, key) for key in headers[adapter].tensors]

    def header(name: str) -> Header:
        if name not in headers:
            headers[name] = read_header(_HubFile(repo, name, commit, token, advice))
        return headers[name]

    def adapter_config(lora_file: str) -> tuple[Path, str]:
        name = posixpath.join(posixpath.dirname(lora_file), "adapter_config.json")
        return _download(repo, name, commit, cache_dir, token, advice), name

    head = build_head(
        find_head_tensors(entries),
        model.head_task,
        where=model.head_index,
        header=header,
        adapter_config=adapter_config,
    )
    source = f"{repo}@{commit}: {head.describe()}"
    if adapter is None:
        source += "; no adapter"
    elif head.lora is None:
        # the adapter leaves the head alone (it may fine-tune the decoder only): the base head is the head
        source += f"; {adapter} has no LoRA for the head: base head as is"
    return head.weight, head.bias, source, head.kind


def _open_adapter(
    repo: str, name: str, commit: str, cache_dir: Path | None, token: str | None, advice: _Advice
) -> Readable:
    """The adapter's safetensors: downloaded whole when small (see :data:`_WHOLE_FILE_LIMIT`), else read
    by ranges from the Hub. Its size comes from the Hub's file metadata (a HEAD request)."""
    try:
        size = get_hf_file_metadata(
            hf_hub_url(repo, name, revision=commit), token=token, library_name="docvec", retry_on_errors=True
        ).size
    except Exception as exc:  # huggingface_hub, httpx and OS errors: none may escape
        raise ToolError(_failure_message(exc, repo, name, commit, advice)) from exc
    if size is not None and size <= _WHOLE_FILE_LIMIT:
        return LocalFile(_download(repo, name, commit, cache_dir, token, advice), name)
    logger.info("%s is %s bytes: reading only the head's LoRA from it", name, size)
    return _HubFile(repo, name, commit, token, advice)
