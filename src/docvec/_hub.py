"""Published models docvec can download from the Hugging Face Hub (``docvec models pull``).

A model in the registry is a pair of GGUF files: the language model at a chosen quantization and the
vision encoder (mmproj). Both are fetched with :func:`huggingface_hub.hf_hub_download` into the Hugging
Face cache, so a second pull reuses what is there and an interrupted one resumes. :func:`find_cached`
answers from the cache alone and never touches the network.

Repository ids and file names are data (:data:`REGISTRY`); where they come from is noted next to them.
Every huggingface_hub or network failure is turned into a :class:`~docvec.errors.ToolError` that names
the repository and the file and says what to do; a registry name or quantization that does not exist is a
:class:`~docvec.errors.ModelNotFoundError` listing the valid choices.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from huggingface_hub import constants as hf_constants
from huggingface_hub import hf_hub_download, try_to_load_from_cache
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from ._config import default_cache_dir
from ._errors import ModelNotFoundError, ToolError
from ._modelfiles import ModelFiles
from ._tiny_model import REGISTRY_NAME, find_tiny_model, tiny_model_dir

__all__ = [
    "REGISTRY",
    "RegistryModel",
    "find_cached",
    "find_registered",
    "get_model",
    "licence_notice",
    "pull",
    "registry_names",
]

logger = logging.getLogger("docvec")


@dataclass(frozen=True)
class RegistryModel:
    """A published model docvec knows how to download: where its two GGUF files live and its licence."""

    #: Short name used on the command line (``docvec models pull <name>``).
    name: str
    description: str
    #: Hugging Face repository holding the language-model GGUFs.
    lm_repo: str
    #: Quantization (as written in the file names, e.g. ``"Q4_K_M"``) → file name in ``lm_repo``.
    lm_files: Mapping[str, str] = field(hash=False)
    default_quant: str
    #: Hugging Face repository holding the vision encoder.
    mmproj_repo: str
    #: File name of the vision encoder in ``mmproj_repo``.
    mmproj_file: str
    #: SPDX identifier of the licence.
    licence_id: str
    licence_url: str
    #: Short text shown to the user before and after a download.
    licence_text: str
    homepage: str
    #: Git revision (branch, tag or commit hash) both files are taken from.
    revision: str = "main"

    @property
    def quants(self) -> tuple[str, ...]:
        """The quantizations published for the language model, in registry order."""
        return tuple(self.lm_files)


# --- jina-embeddings-v4 -----------------------------------------------------------------------------
#
# Sources (fix this table, not the code, if the Hub changes):
# * jinaai/jina-embeddings-v4-text-retrieval-GGUF is one of the three text-only repos named in the
#   jina-ai/jina-embeddings-v4-gguf README (synced to the Hub model card by that repo's cd.yml). The card
#   says "All models above provide F16, Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q3_K_M and dynamic quantizations such
#   as IQ1_S, IQ2_XXS" and its licence metadata is cc-by-nc-4.0.
# * File names: the repo's quantize.sh names every output "<base>-<QUANT>.gguf" with base
#   "jina-embeddings-v4-text-retrieval" (from jina-embeddings-v4-text-retrieval-F16.gguf, the name its
#   imatrix command and the jina-ai/llama.cpp fork README use) and uploads it to the repo root.
#   Q4_K_M, Q5_K_M, Q8_0 and F16 names are also seen verbatim in third-party download scripts.
# * The quantizations past the six the card lists by name come from the card's benchmark table and
#   quantize.sh; IQ1_S, IQ2_XXS and IQ3_M are seen verbatim in third-party code, the others are inferred
#   from the naming pattern (not confirmed by a file listing).
# * mmproj: the jina-ai/llama.cpp fork README (jina_embeddings/) downloads
#   "mmproj-jina-embeddings-v4-retrieval-BF16.gguf" from jinaai/jina-embeddings-v4-text-retrieval-GGUF
#   (repo root, `huggingface-cli download ... --include <file>`) and recommends BF16 because the F16 mmproj
#   can give NaN embeddings.
# * Licence: the GGUF model cards' metadata says cc-by-nc-4.0 (so do docvec's notes for the
#   jinaai/jina-embeddings-v4 card); jina.ai's own model page lists the Qwen Research License (the backbone
#   is Qwen2.5-VL-3B-Instruct). Both rule out commercial use without an agreement; the notice names both.
_JINA_V4_LM_BASE = "jina-embeddings-v4-text-retrieval"
_JINA_V4_QUANTS = (
    # Listed by name on the model card.
    "F16",
    "Q8_0",
    "Q6_K",
    "Q5_K_M",
    "Q4_K_M",
    "Q3_K_M",
    # From the card's quantization table and quantize.sh (pattern-derived names).
    "Q5_K_S",
    "IQ4_NL",
    "IQ4_XS",
    "IQ3_M",
    "IQ3_S",
    "IQ3_XS",
    "IQ3_XXS",
    "Q2_K",
    "IQ2_M",
    "IQ2_XXS",
    "IQ1_M",
    "IQ1_S",
)

_JINA_V4_LICENCE = (
    "jina-embeddings-v4 is licensed for NON-COMMERCIAL use only: CC BY-NC 4.0 "
    "(https://creativecommons.org/licenses/by-nc/4.0/), as declared by Jina AI on Hugging Face; Jina AI's "
    "model page also lists the Qwen Research License of its Qwen2.5-VL backbone. Commercial use needs an "
    "agreement with Jina AI (https://jina.ai/contact-sales). docvec's own Apache-2.0 licence does not "
    "extend to the model weights."
)

REGISTRY: dict[str, RegistryModel] = {
    "jina-v4": RegistryModel(
        name="jina-v4",
        description=(
            "jina-embeddings-v4 (Qwen2.5-VL-3B backbone), retrieval adapter merged: text-retrieval language "
            "model GGUF plus the BF16 vision encoder (mmproj)"
        ),
        lm_repo="jinaai/jina-embeddings-v4-text-retrieval-GGUF",
        lm_files=MappingProxyType({q: f"{_JINA_V4_LM_BASE}-{q}.gguf" for q in _JINA_V4_QUANTS}),
        default_quant="Q8_0",
        mmproj_repo="jinaai/jina-embeddings-v4-text-retrieval-GGUF",
        mmproj_file="mmproj-jina-embeddings-v4-retrieval-BF16.gguf",
        licence_id="CC-BY-NC-4.0",
        licence_url="https://creativecommons.org/licenses/by-nc/4.0/",
        licence_text=_JINA_V4_LICENCE,
        homepage="https://huggingface.co/jinaai/jina-embeddings-v4",
    ),
}


def registry_names() -> list[str]:
    """The names :func:`pull` accepts, sorted."""
    return sorted(REGISTRY)


def get_model(name: str) -> RegistryModel:
    """The registry entry called ``name`` (case-insensitive).

    Raises:
        ModelNotFoundError: no such entry; the message lists the known names.
    """
    key = name.strip().lower()
    try:
        return REGISTRY[key]
    except KeyError:
        raise ModelNotFoundError(
            f"unknown model {name!r}: docvec can pull {', '.join(registry_names())}"
        ) from None


def licence_notice(name: str) -> str:
    """The licence notice of registry model ``name``, to show before and after downloading it.

    Raises:
        ModelNotFoundError: ``name`` is not in the registry.
    """
    model = get_model(name)
    return (
        f"{model.licence_text}\n"
        f"Licence: {model.licence_id} ({model.licence_url}); model card: {model.homepage}"
    )


def pull(
    name: str,
    *,
    quant: str | None = None,
    cache_dir: Path | None = None,
    token: str | None = None,
) -> ModelFiles:
    """Download registry model ``name`` (language model at ``quant`` plus the mmproj) into the HF cache.

    Files already in the cache are reused after a cheap freshness check, partial downloads are resumed, and
    with ``HF_HUB_OFFLINE=1`` the cache alone is used. ``cache_dir`` is passed to huggingface_hub as its
    cache folder (default: ``HF_HUB_CACHE``, normally ``~/.cache/huggingface/hub``); ``token`` is a
    Hugging Face token (default: ``HF_TOKEN`` or the stored login).

    Args:
        name: a registry name (see :func:`registry_names`).
        quant: a quantization of the language model (e.g. ``"Q4_K_M"``, case-insensitive); default the
            model's ``default_quant``.
        cache_dir: Hugging Face cache folder to use instead of the default.
        token: Hugging Face access token.

    Returns:
        The local paths of both files.

    Raises:
        ModelNotFoundError: unknown ``name`` or ``quant``.
        ToolError: a download failed (offline, no access, file missing on the Hub, disk error, ...).
    """
    model = get_model(name)
    lm_file = _lm_file(model, quant)
    logger.info("pulling %s: %s and %s", model.name, lm_file, model.mmproj_file)
    lm_path = _download(model.lm_repo, lm_file, model.revision, cache_dir, token)
    mmproj_path = _download(model.mmproj_repo, model.mmproj_file, model.revision, cache_dir, token)
    return ModelFiles(language_model=lm_path, mmproj=mmproj_path)


def find_cached(
    name: str,
    *,
    quant: str | None = None,
    cache_dir: Path | None = None,
) -> ModelFiles | None:
    """The local paths of registry model ``name`` if both its files are already in the HF cache.

    Never touches the network. Returns ``None`` when either file is missing from the cache.

    Raises:
        ModelNotFoundError: unknown ``name`` or ``quant``.
    """
    model = get_model(name)
    lm_file = _lm_file(model, quant)
    lm_path = _cached(model.lm_repo, lm_file, model.revision, cache_dir)
    mmproj_path = _cached(model.mmproj_repo, model.mmproj_file, model.revision, cache_dir)
    if lm_path is None or mmproj_path is None:
        return None
    return ModelFiles(language_model=lm_path, mmproj=mmproj_path)


def find_registered(name: str, *, cache_dir: Path | None = None) -> ModelFiles | None:
    """The local files of a model setting that names a model instead of a path: a downloaded registry
    model at its default quantization, or ``tiny``, the offline test model built in docvec's cache folder
    ``cache_dir`` (by ``docvec demo`` or ``docvec models pull tiny``); ``None`` otherwise.

    The hook :func:`docvec._modelfiles.resolve_model` calls for a model setting that is not a path.
    """
    if name.lower() == REGISTRY_NAME:
        return find_tiny_model(tiny_model_dir(cache_dir or default_cache_dir()))
    if name.lower() not in {n.lower() for n in REGISTRY}:
        return None
    return find_cached(name)


def _lm_file(model: RegistryModel, quant: str | None) -> str:
    """The language-model file name of ``model`` at ``quant`` (its default when ``None``)."""
    if quant is None:
        return model.lm_files[model.default_quant]
    wanted = quant.strip().upper()
    try:
        return model.lm_files[wanted]
    except KeyError:
        raise ModelNotFoundError(
            f"{model.name} has no quantization {quant!r}: choose one of {', '.join(model.quants)}"
            f" (default {model.default_quant})"
        ) from None


def _cached(repo_id: str, filename: str, revision: str, cache_dir: Path | None) -> Path | None:
    """Path of ``filename`` in the HF cache, or ``None``; reads the disk only."""
    try:
        found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision)
    except (OSError, ValueError) as exc:  # unreadable cache folder, invalid name
        logger.debug("cache lookup of %s in %s failed: %s", filename, repo_id, exc)
        return None
    if not isinstance(found, str):  # None, or the "known not to exist" marker
        return None
    path = Path(found)
    return path if path.is_file() else None


def _download(repo_id: str, filename: str, revision: str, cache_dir: Path | None, token: str | None) -> Path:
    """Download (or reuse from the cache) one file; every failure becomes a :class:`ToolError`."""
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
        raise ToolError(_failure_message(exc, repo_id, filename, revision)) from exc
    path = Path(str(local))
    logger.info("%s is at %s", filename, path)
    return path


# what is left when the Hub is out of reach: files copied in from a machine that has them
_LOCAL_MODEL_HINT = "or copy the model's two GGUF files here and set DOCVEC_MODEL to their folder"


def _failure_message(exc: Exception, repo_id: str, filename: str, revision: str) -> str:
    """A message for a failed download of ``filename`` that names the repository and says what to do."""
    what = f"could not download {filename} from https://huggingface.co/{repo_id} (revision {revision})"
    if isinstance(exc, (LocalEntryNotFoundError, OfflineModeIsEnabled)):
        if hf_constants.is_offline_mode():
            return (
                f"{what}: it is not in the Hugging Face cache and offline mode is on (HF_HUB_OFFLINE is "
                f"set). Unset HF_HUB_OFFLINE and check the network, {_LOCAL_MODEL_HINT}."
            )
        return (
            f"{what}: the Hugging Face Hub could not be reached and the file is not in the cache. "
            f"Check the network connection (and HTTPS_PROXY if you use a proxy), {_LOCAL_MODEL_HINT}."
        )
    if isinstance(exc, GatedRepoError):
        return (
            f"{what}: the repository is gated. Accept its terms at https://huggingface.co/{repo_id} and set "
            f"HF_TOKEN to a token of that account, {_LOCAL_MODEL_HINT}."
        )
    if isinstance(exc, RepositoryNotFoundError):
        return (
            f"{what}: the repository was not found or needs authentication (HTTP {_status(exc) or '?'}). "
            f"Set HF_TOKEN if it is private, {_LOCAL_MODEL_HINT}."
        )
    if isinstance(exc, RevisionNotFoundError):
        return f"{what}: the revision does not exist in the repository; docvec's registry needs updating."
    if isinstance(exc, RemoteEntryNotFoundError):
        return (
            f"{what}: the repository has no such file (HTTP 404); docvec's registry entry is out of date. "
            f"Pick another --quant, {_LOCAL_MODEL_HINT}."
        )
    if isinstance(exc, HfHubHTTPError):
        status = _status(exc)
        if status in (401, 403):
            return (
                f"{what}: access denied (HTTP {status}). Set HF_TOKEN to a valid token, {_LOCAL_MODEL_HINT}."
            )
        return (
            f"{what}: the Hub answered HTTP {status or '?'}. Try again later and check the network, "
            f"{_LOCAL_MODEL_HINT}."
        )
    if isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        return (
            f"{what}: {type(exc).__name__}: {exc}. Check free disk space and that the Hugging Face cache "
            f"folder (HF_HUB_CACHE, or the cache folder docvec was given) is writable."
        )
    return (
        f"{what}: {type(exc).__name__}: {exc}. Check the network connection (and HTTPS_PROXY if you use a "
        f"proxy), {_LOCAL_MODEL_HINT}."
    )


def _status(exc: HfHubHTTPError) -> int | None:
    """The HTTP status code of ``exc``, if it carries a response."""
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None
