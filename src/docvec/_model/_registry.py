"""The model registry: the models docvec knows by name, where their files come from, and where they are
once on this machine. Data and disk lookups only: no download, no conversion (``docvec models pull``,
in :mod:`docvec._tools._pull`, fetches them; ``docvec models tiny`` builds the test model).

A model in the registry is a pair of GGUF files, the language model at a chosen quantization and the
vision encoder (mmproj), published in a Hugging Face repository, and, for a model whose entry names a head
source, its multi-vector head, which docvec builds into its own cache folder
(``<cache>/models/<name>/<commit>/multivector-head.gguf``, ``refs/<revision>`` naming the commit, as the
Hugging Face cache does). :func:`find_registered` answers from the caches alone and never touches the
network. ``tiny``, the offline test model, is found where ``docvec models pull tiny`` and ``docvec demo``
build it.

Repository ids and file names are data (:data:`REGISTRY`); where they come from is noted next to them. A
registry name or quantization that does not exist is a :class:`~docvec.ModelNotFoundError` listing the
valid choices.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from .._config import default_cache_dir
from .._errors import ModelNotFoundError
from ._files import ModelFiles
from ._head import FILE_NAME as HEAD_FILE_NAME

__all__ = [
    "REGISTRY",
    "REGISTRY_NAME",
    "TINY_ARCH",
    "TINY_ARCHES",
    "TINY_NAME",
    "Conversion",
    "RegistryModel",
    "cached_head",
    "find_cached",
    "find_converted",
    "find_registered",
    "find_tiny_model",
    "get_model",
    "licence_notice",
    "lm_file",
    "model_root",
    "pull_with_head",
    "quant_key",
    "ref_file",
    "registry_names",
    "reranker_names",
    "tiny_arch",
    "tiny_model_dir",
    "tiny_stamp",
]

logger = logging.getLogger("docvec")


@dataclass(frozen=True)
class Conversion:
    """How ``docvec models pull`` makes one quantization of a model published as a checkpoint only."""

    #: the converter's ``--outtype`` (``"f16"``, ``"bf16"``); ``None``: BF16 where the CPU has bf16
    #: arithmetic, else F16 (``docvec models convert``'s default)
    outtype: str | None
    #: llama.cpp's quantizer type applied to that conversion's language model, or ``None``
    quantize: str | None = None


@dataclass(frozen=True)
class RegistryModel:
    """A published model docvec knows how to download: where its two GGUF files live and its licence."""

    #: Short name used on the command line (``docvec models pull <name>``).
    name: str
    description: str
    #: its profile (:data:`docvec._model._profiles.PROFILES` or ``RERANKER_PROFILES``, by name), and the
    #: width of its hidden states (an embedder's full vector size)
    profile: str
    width: int
    #: Hugging Face repository holding the language-model GGUFs.
    lm_repo: str
    #: Quantization (as written in the file names, e.g. ``"Q4_K_M"``) → file name in ``lm_repo``.
    lm_files: Mapping[str, str] = field(hash=False)
    default_quant: str
    #: Hugging Face repository holding the vision encoder.
    mmproj_repo: str
    #: File name of the vision encoder in ``mmproj_repo``; ``None`` for a model converted here (its mmproj
    #: is the one the conversion writes beside the language model).
    mmproj_file: str | None
    #: SPDX identifier of the licence.
    licence_id: str
    licence_url: str
    #: Short text shown to the user before and after a download.
    licence_text: str
    homepage: str
    #: Git revision (branch, tag or commit hash) both files are taken from.
    revision: str = "main"
    #: Hugging Face repository of the full checkpoint the multi-vector head is read from; ``None``: the
    #: model has no head docvec can get.
    head_repo: str | None = None
    #: The checkpoint's shard index (``weight_map``: tensor name -> shard file) in ``head_repo``.
    head_index: str = "model.safetensors.index.json"
    #: Folder in ``head_repo`` holding the task adapter (``adapter_config.json`` and
    #: ``adapter_model.safetensors``) whose LoRA for the head is merged in; ``None``: the base head as is.
    head_adapter: str | None = None
    #: The adapter task whose LoRA is merged, as it appears in a multi-task adapter's tensor names.
    head_task: str = "retrieval"
    #: Git revision of ``head_repo``; the head is cached under the commit it resolves to.
    head_revision: str = "main"
    #: ``None``: ``lm_repo`` and ``mmproj_repo`` publish the GGUFs. Otherwise the model is published as a
    #: safetensors checkpoint only, in this repository: ``pull`` downloads it (at ``revision``) and converts
    #: it with the pinned converter into docvec's cache, ``<cache>/models/<name>/<commit>/``, where
    #: ``lm_files`` name the language model of each quantization (relative to that folder; the converter's
    #: names for the ``conversions`` of the same key) and its mmproj lies beside it.
    checkpoint_repo: str | None = None
    #: quantization -> how it is converted, for a ``checkpoint_repo`` model (the keys of ``lm_files``)
    conversions: Mapping[str, Conversion] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    #: which size of its family it is, where the profile's published scores differ by size
    size: str | None = None
    #: an embedding model (``DOCVEC_MODEL``), or a reranker (``DOCVEC_RERANK_MODEL``)
    kind: Literal["embedder", "reranker"] = "embedder"

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
#
# The multi-vector head (head_repo, head_adapter, head_task). What was verified, and where:
# * jina-embeddings-v4's modeling_jina_embeddings_v4.py and custom_lora_module.py (the repository's remote
#   code; read in copies vendored by public training repos): the head is an nn.Linear(hidden_size,
#   multi_vector_projector_dim) set on the model itself as `multi_vector_projector`, so its checkpoint keys
#   are multi_vector_projector.{weight,bias}. from_pretrained loads ONE PEFT adapter folder, `adapters/`
#   (snapshot_download(allow_patterns=["adapters/*"]), then LoraConfig/PeftModel.from_pretrained on it),
#   not one per task: MultiAdapterLinear keeps a lora_A/lora_B pair per task name in ModuleDicts and scales
#   by lora_alpha / r (lora_alpha / sqrt(r) with use_rslora); the bias is not adapted.
# * Pushkinist/rMLX, crates/rmlx-models/src/jina_v4/{model,lora}.rs, a port written against the real
#   safetensors headers: shards model-00001-of-00002 and model-00002-of-00002.safetensors, with
#   multi_vector_projector.weight and .bias (BF16) in the second; adapters/adapter_model.safetensors is
#   343.2 MB (1518 BF16 tensors, all three tasks) and names the head's LoRA
#   base_model.model.multi_vector_projector.lora_{A,B}.<task>.weight, task in retrieval, text-matching,
#   code; adapters/adapter_config.json has r = 32, lora_alpha = 32.
# * Mazyod/jina-embeddings-v4-vllm-plugin, src/jinav4_vllm/projector/{extract,merge}.py: extracts the
#   same head from this repository (the key ending in multi_vector_projector.weight, adapter keys holding
#   multi_vector_projector and lora_A / lora_B), merges W + alpha/r * B @ A with the bias unchanged, and
#   checks the result against the model's own projector.
# Assumed, not seen in a listing of the Hub repository itself: the index is named
# model.safetensors.index.json (transformers' name for sharded safetensors), and "main" still has this
# layout. So nothing below hard-codes shard names, offsets or sizes: the index says which shard holds the
# head, the headers say where its bytes are, and each step that finds something else says so. A
# single-task adapter (keys without a task segment, as in an adapters/<task>/ layout) is accepted too.
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
        profile="jina-embeddings-v4",
        width=2048,
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
        head_repo="jinaai/jina-embeddings-v4",
        head_adapter="adapters",
        head_task="retrieval",
    ),
}


# --- Qwen3-VL-Embedding -------------------------------------------------------------------------------
#
# Sources (fix this table, not the code, if the Hub changes):
# * Qwen/Qwen3-VL-Embedding-2B and -8B (Apache-2.0, ungated): the checkpoints of the official code
#   (github QwenLM/Qwen3-VL-Embedding). Qwen publishes no GGUFs of them; the GGUF copies on the Hub are third
#   parties' conversions (mradermacher among them), so docvec converts the official checkpoint itself with
#   the pinned converter, as `docvec models convert` does, and the conversion is what parity was tested on.
# * 2B revision 9f2f7e710d6d81056aa5c0a4f04764fec6bb7bda: the commit several independent public projects
#   pin (seen in their code and notes, with "one complete safetensors file, no weight shard index at this
#   revision", 18 files, 4,271,068,726 bytes); not checked against a listing of the Hub itself. The 8B is
#   taken at main (no pin seen); the commit a pull resolves is recorded, and its conversion cached under it.
# * Files: the converter reads config.json, the weights (model.safetensors, or an index and its shards:
#   whichever the revision has), tokenizer.json, tokenizer_config.json and preprocessor_config.json (the
#   vision encoder's normalisation); the rest of the repository (README, scripts, examples) is not needed.
_QWEN3_VL_LICENCE = (
    "Qwen3-VL-Embedding is licensed under Apache-2.0 (https://www.apache.org/licenses/LICENSE-2.0), as "
    "declared by Qwen on Hugging Face: commercial use is allowed under its terms."
)


# Qwen3-VL-Reranker, the same way (sources as above, for its own repositories):
# * Qwen/Qwen3-VL-Reranker-2B and -8B (Apache-2.0, ungated), the checkpoints of the same official code
#   (src/models/qwen3_vl_reranker.py loads them with Qwen3VLForConditionalGeneration). No GGUF from Qwen;
#   docvec converts them with the pinned converter as rerankers (its classifier: the head's "yes" and "no"
#   rows; see docvec._tools._convert). Both at main (no pin seen); a pull records the commit it resolved.
_QWEN3_VL_RERANKER_LICENCE = _QWEN3_VL_LICENCE.replace("Qwen3-VL-Embedding", "Qwen3-VL-Reranker")


#: how `pull` converts a model published as a checkpoint: Q8_0 quantized from the CPU's float type (its
#: mmproj stays in that type), or BF16, or F16
_CONVERSIONS = MappingProxyType(
    {"Q8_0": Conversion(None, "Q8_0"), "BF16": Conversion("bf16"), "F16": Conversion("f16")}
)


def _converted_files(base: str) -> Mapping[str, str]:
    """The language-model file of each of :data:`_CONVERSIONS`, named after ``base``, in its cache folder."""
    return MappingProxyType(
        {"Q8_0": f"Q8_0/{base}-Q8_0.gguf", "BF16": f"{base}-BF16.gguf", "F16": f"{base}-F16.gguf"}
    )


def _qwen3_vl(family: str, size: str, revision: str, width: int) -> RegistryModel:
    """A Qwen3-VL-Embedding or -Reranker checkpoint (``family``: ``Embedding`` or ``Reranker``), converted
    here."""
    base = f"qwen3-vl-{family.lower()}-{size.lower()}"
    repo = f"Qwen/Qwen3-VL-{family}-{size}"
    reranker = family == "Reranker"
    return RegistryModel(
        name=base,
        profile="qwen3-vl-reranker" if reranker else "qwen3-vl-embedding",
        kind="reranker" if reranker else "embedder",
        width=width,
        size=size,
        description=(
            f"Qwen3-VL-{family}-{size} (Qwen3-VL-{size} backbone), converted here from the official "
            "checkpoint: language model GGUF plus vision encoder (mmproj)"
        ),
        lm_repo=repo,
        lm_files=_converted_files(base),
        conversions=_CONVERSIONS,
        default_quant="Q8_0",
        mmproj_repo=repo,
        mmproj_file=None,
        licence_id="Apache-2.0",
        licence_url="https://www.apache.org/licenses/LICENSE-2.0",
        licence_text=_QWEN3_VL_RERANKER_LICENCE if reranker else _QWEN3_VL_LICENCE,
        homepage=f"https://huggingface.co/{repo}",
        revision=revision,
        checkpoint_repo=repo,
    )


# hidden sizes 2048 and 4096: Qwen3-VL-2B's and -8B's (the cards' full embedding sizes)
REGISTRY["qwen3-vl-embedding-2b"] = _qwen3_vl(
    "Embedding", "2B", "9f2f7e710d6d81056aa5c0a4f04764fec6bb7bda", 2048
)
REGISTRY["qwen3-vl-embedding-8b"] = _qwen3_vl("Embedding", "8B", "main", 4096)
REGISTRY["qwen3-vl-reranker-2b"] = _qwen3_vl("Reranker", "2B", "main", 2048)
REGISTRY["qwen3-vl-reranker-8b"] = _qwen3_vl("Reranker", "8B", "main", 4096)


# --- VultronRetriever (ColQwen3.5: late interaction) -------------------------------------------------
#
# Sources (fix this table, not the code, if the Hub changes):
# * vultr/VultronRetrieverFlash-Qwen3.5-0.8B, -Core-Qwen3.5-4.5B and -Prime-Qwen3.5-8B: Apache-2.0 (the
#   cards' and MTEB's model entries, embeddings-benchmark/mteb colqwen_models.py). Checkpoints only, no GGUF:
#   docvec converts them with the pinned converter. Merged weights saved by colpali-engine as ColQwen3_5
#   (config architectures ["ColQwen3_5"], as vLLM's ColQwen3.5 support reads them, PR vllm-project/vllm#46108;
#   language_model.*, visual.* and custom_text_proj.{weight,bias} at the top: the conversion renames the
#   first two as the converter reads them and exports the head, docvec._tools._convert). Not seen in a
#   listing of the Hub itself: whether the weights are one file or shards (the pull takes either).
# * Their prompts are colpali-engine's ColQwen3_5Processor's (MTEB evaluates them through colpali-engine,
#   use_instructions=False), their page budget 1,792 visual tokens (the ColQwen3.5 profile's max_pixels).
# * Token vectors of 320 (their config's dim); hidden sizes 1024, 2560 and 4096 (MTEB's entries).
# * Scores: the cards ("Official MTEB": Flash V3 56.49, Core 63.72) and MTEB's results repository (Prime
#   64.72), ViDoRe v3 over its eight public tasks; see docvec._model._profiles.
# Taken at main; a pull records the commit it resolved and caches the conversion under it.
_VULTRON_LICENCE = (
    "VultronRetriever is licensed under Apache-2.0 (https://www.apache.org/licenses/LICENSE-2.0), as "
    "declared by Vultr on Hugging Face: commercial use is allowed under its terms."
)


def _vultron(tier: str, size: str) -> RegistryModel:
    """A VultronRetriever checkpoint (``tier``: Flash, Core or Prime), converted here."""
    name = f"vultron-{tier.lower()}-{size.lower()}"
    repo = f"vultr/VultronRetriever{tier}-Qwen3.5-{size}"
    return RegistryModel(
        name=name,
        profile="colqwen3.5",
        width=320,
        size=size,
        description=(
            f"VultronRetriever {tier} (Qwen3.5-{size} backbone, late interaction: 320-d token vectors), "
            "converted here from its checkpoint: language model GGUF, vision encoder (mmproj) and head"
        ),
        lm_repo=repo,
        lm_files=_converted_files(name),
        conversions=_CONVERSIONS,
        default_quant="Q8_0",
        mmproj_repo=repo,
        mmproj_file=None,
        licence_id="Apache-2.0",
        licence_url="https://www.apache.org/licenses/LICENSE-2.0",
        licence_text=_VULTRON_LICENCE,
        homepage=f"https://huggingface.co/{repo}",
        checkpoint_repo=repo,
    )


REGISTRY["vultron-flash-0.8b"] = _vultron("Flash", "0.8B")
REGISTRY["vultron-core-4.5b"] = _vultron("Core", "4.5B")
REGISTRY["vultron-prime-8b"] = _vultron("Prime", "8B")


# --- tomoro-colqwen3-embed (ColQwen3: late interaction) ---------------------------------------------------
#
# Sources (fix this table, not the code, if the Hub changes):
# * TomoroAI/tomoro-colqwen3-embed-4b and -8b: Apache-2.0 (the cards; MTEB's model entries), Qwen3-VL-4B/8B
#   merged with Qwen3-Embedding (the 4b card). Checkpoints with remote code of their own (trust_remote_code);
#   docvec does not run it: its config is a Qwen3VLConfig of model_type "colqwen3" with the head's size as
#   embed_dim (vLLM's ColQwen3Config reads it so), its weights the model under "vlm." and the head as
#   embedding_proj_layer (vLLM's ColQwen3 loader), which the conversion renames as the converter reads them
#   (docvec._tools._convert). Not seen in a listing of the Hub itself: the file names (the pull reads the
#   index or the one model.safetensors, whichever is there).
# * Prompts: their processor's, colpali-engine's ColQwen3 rules (a query's ten <|endoftext|>, the page
#   prompt); max_num_visual_tokens 1280, the ColQwen3 profile's max_pixels.
# * Scores: MTEB's results repository, ViDoRe v3 over its eight public tasks (60.16 and 61.60).
_TOMORO_LICENCE = (
    "tomoro-colqwen3-embed is licensed under Apache-2.0 (https://www.apache.org/licenses/LICENSE-2.0), as "
    "declared by TomoroAI on Hugging Face: commercial use is allowed under its terms."
)


def _tomoro(size: str) -> RegistryModel:
    """A tomoro-colqwen3-embed checkpoint, converted here."""
    name = f"tomoro-colqwen3-{size.lower()}"
    repo = f"TomoroAI/tomoro-colqwen3-embed-{size.lower()}"
    return dataclasses.replace(
        _vultron("Flash", "0.8B"),
        name=name,
        profile="colqwen3",
        size=size.upper(),
        description=(
            f"tomoro-colqwen3-embed-{size.lower()} (Qwen3-VL-{size.upper()} backbone, late interaction: "
            "320-d token vectors), converted here from its checkpoint: language model GGUF, vision encoder "
            "(mmproj) and head"
        ),
        lm_repo=repo,
        lm_files=_converted_files(name),
        mmproj_repo=repo,
        licence_text=_TOMORO_LICENCE,
        homepage=f"https://huggingface.co/{repo}",
        checkpoint_repo=repo,
    )


REGISTRY["tomoro-colqwen3-4b"] = _tomoro("4b")
REGISTRY["tomoro-colqwen3-8b"] = _tomoro("8b")


def registry_names() -> list[str]:
    """The names :func:`pull` accepts, sorted."""
    return sorted(REGISTRY)


def reranker_names() -> list[str]:
    """The registry's rerankers, smallest first (as sorted by name)."""
    return [n for n in registry_names() if REGISTRY[n].kind == "reranker"]


def pull_with_head() -> str:
    """How to get a model with a multi-vector head, for a message: each registry model that comes with one,
    as its profile and the command that pulls it (``"<profile>: `docvec models pull <name>`"``)."""
    return "; ".join(
        f"{m.profile}: `docvec models pull {m.name}`"
        for m in (REGISTRY[n] for n in registry_names())
        if m.head_repo is not None
    )


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


def find_cached(
    name: str,
    *,
    quant: str | None = None,
    cache_dir: Path | None = None,
    docvec_cache_dir: Path | None = None,
) -> ModelFiles | None:
    """The local paths of registry model ``name`` if both its GGUF files are already in the HF cache.

    Never touches the network. Returns ``None`` when either GGUF is missing from the cache; ``head`` is the
    multi-vector head in ``docvec_cache_dir`` (default ``~/.cache/docvec``) for the commit the last pull
    found, or ``None`` when none was pulled (as with a pull from before docvec got heads, or ``--no-head``).

    Raises:
        ModelNotFoundError: unknown ``name`` or ``quant``.
    """
    model = get_model(name)
    lm_name = lm_file(model, quant)
    if model.checkpoint_repo is not None:
        return find_converted(model, lm_name, docvec_cache_dir or default_cache_dir())
    lm_path = _cached(model.lm_repo, lm_name, model.revision, cache_dir)
    assert model.mmproj_file is not None  # a published GGUF pair
    mmproj_path = _cached(model.mmproj_repo, model.mmproj_file, model.revision, cache_dir)
    if lm_path is None or mmproj_path is None:
        return None
    head_path = None
    if model.head_repo is not None:
        head_path = cached_head(
            model_root(model, docvec_cache_dir or default_cache_dir()), model.head_revision
        )
    return ModelFiles(language_model=lm_path, mmproj=mmproj_path, head=head_path)


def find_registered(name: str, *, cache_dir: Path | None = None) -> ModelFiles | None:
    """The local files of a model setting that names a model instead of a path: a downloaded registry
    model at its default quantization (with its multi-vector head from docvec's cache folder ``cache_dir``
    when it was pulled), or ``tiny``, the offline test model built in ``cache_dir`` (by ``docvec demo`` or
    ``docvec models pull tiny``); ``None`` otherwise.

    The hook :func:`docvec._model._files.resolve_model` calls for a model setting that is not a path.
    """
    if name.lower() == REGISTRY_NAME:
        return find_tiny_model(tiny_model_dir(cache_dir or default_cache_dir()))
    if name.lower() not in {n.lower() for n in REGISTRY}:
        return None
    return find_cached(name, docvec_cache_dir=cache_dir)


def quant_key(model: RegistryModel, quant: str | None) -> str:
    """``quant`` as ``model``'s registry spells it (case-insensitive; its default when ``None``).

    Raises:
        ModelNotFoundError: ``model`` has no such quantization; the message lists them.
    """
    if quant is None:
        return model.default_quant
    wanted = quant.strip().upper()
    if wanted not in model.lm_files:
        raise ModelNotFoundError(
            f"{model.name} has no quantization {quant!r}: choose one of {', '.join(model.quants)}"
            f" (default {model.default_quant})"
        )
    return wanted


def lm_file(model: RegistryModel, quant: str | None) -> str:
    """The language-model file name of ``model`` at ``quant`` (its default when ``None``)."""
    return model.lm_files[quant_key(model, quant)]


def _cached(repo_id: str, filename: str, revision: str, cache_dir: Path | None) -> Path | None:
    """Path of ``filename`` in the HF cache, or ``None``; reads the disk only."""
    from huggingface_hub import try_to_load_from_cache  # only when a registry name is looked up

    try:
        found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision)
    except (OSError, ValueError) as exc:  # unreadable cache folder, invalid name
        logger.debug("cache lookup of %s in %s failed: %s", filename, repo_id, exc)
        return None
    if not isinstance(found, str):  # None, or the "known not to exist" marker
        return None
    path = Path(found)
    return path if path.is_file() else None


def find_converted(model: RegistryModel, lm_name: str, docvec_cache_dir: Path) -> ModelFiles | None:
    """The files of checkpoint model ``model`` that the last pull of its revision converted, with the
    language model ``lm_name`` and the one mmproj (and the head, for a model with one) beside it; ``None``
    when there are none. Disk only."""
    commit = _ref_commit(model_root(model, docvec_cache_dir), model.revision)
    if commit is None:
        return None
    lm = model_root(model, docvec_cache_dir) / commit / lm_name
    mmprojs = sorted(lm.parent.glob("mmproj-*.gguf"))
    if len(mmprojs) > 1:  # conversions to two float types in one folder: the one converted with it
        mmprojs = [p for p in mmprojs if p.name == f"mmproj-{lm.name}"]
    if not lm.is_file() or len(mmprojs) != 1:
        return None
    head = lm.parent / HEAD_FILE_NAME  # the conversion exports a checkpoint's head beside its GGUFs
    return ModelFiles(language_model=lm, mmproj=mmprojs[0], head=head if head.is_file() else None)


def model_root(model: RegistryModel, docvec_cache_dir: Path) -> Path:
    """``model``'s folder in docvec's cache: ``refs/<revision>`` (the commit the revision resolved to at the
    last pull) and, under ``<commit>/``, what docvec made of that commit: the multi-vector head
    (``multivector-head.gguf``) or the conversion of a checkpoint, and the model folders of other
    quantizations (``docvec models pull --quant``, ``--mmproj``)."""
    return docvec_cache_dir / "models" / model.name


def ref_file(root: Path, revision: str) -> Path:
    # a revision may contain "/" (a branch like "refs/pr/1"): one file name, as the HF cache quotes it
    return root / "refs" / revision.replace("/", "--")


def _ref_commit(root: Path, revision: str) -> str | None:
    """The commit the last pull of ``revision`` resolved it to (``ref_file``), or ``None``."""
    try:
        commit = ref_file(root, revision).read_text().strip()
    except OSError:
        return None
    return commit if re.fullmatch(r"[0-9a-f]{40}", commit) else None


def cached_head(root: Path, revision: str) -> Path | None:
    """The head the last pull of ``revision`` wrote, or ``None``; reads the disk only."""
    commit = _ref_commit(root, revision)
    if commit is None:
        return None
    path = root / commit / HEAD_FILE_NAME
    return path if path.is_file() else None


# --- the offline test model ---------------------------------------------------------------------------

#: the architectures ``docvec models tiny --arch`` builds, each standing in for a family: the base name
#: of its files, and whether it has a multi-vector head
TINY_ARCHES: Mapping[str, tuple[str, bool]] = MappingProxyType(
    {
        "qwen2.5-vl": ("tiny-qwen25vl", True),  # jina-embeddings-v4's architecture, with its head
        "qwen3-vl": ("tiny-qwen3vl", False),  # Qwen3-VL-Embedding's, deepstack included
        "qwen3-vl-reranker": ("tiny-qwen3vl-reranker", False),  # Qwen3-VL-Reranker's
        "colqwen3": ("tiny-colqwen3", True),  # ColQwen3's: Qwen3-VL with colpali-engine's head
        "colqwen3.5": ("tiny-colqwen35", True),  # ColQwen3.5's: Qwen3.5 (recurrent layers), the same head
    }
)
#: the default one (``docvec demo``, ``DOCVEC_MODEL=tiny``)
TINY_ARCH = "qwen2.5-vl"
#: the base name of the default tiny model's files
TINY_NAME = TINY_ARCHES[TINY_ARCH][0]
#: its name as a model setting (``DOCVEC_MODEL=tiny``): the build in the cache folder
REGISTRY_NAME = "tiny"
TINY_STAMP = "docvec-tiny.json"


def tiny_model_dir(cache_dir: Path) -> Path:
    """Where ``docvec demo`` and ``docvec models pull tiny`` build the tiny model."""
    return cache_dir / "models" / "tiny"


def tiny_arch(arch: str) -> tuple[str, bool]:
    """The base file name and whether it has a head, of the tiny model of ``arch``; an unknown one is a
    :class:`~docvec.ModelNotFoundError` naming the choices."""
    try:
        return TINY_ARCHES[arch.lower()]
    except KeyError:
        raise ModelNotFoundError(
            f"no tiny model of the architecture {arch!r}: choose one of {', '.join(TINY_ARCHES)}"
        ) from None


def find_tiny_model(
    out_dir: Path, *, seed: int = 0, outtype: str = "f16", arch: str = TINY_ARCH
) -> ModelFiles | None:
    """The tiny model of ``arch`` built in ``out_dir`` with this seed and type, or ``None`` when there is
    none."""
    base, has_head = tiny_arch(arch)
    lm = out_dir / f"{base}-{outtype.upper()}.gguf"
    mm = out_dir / f"mmproj-{base}-{outtype.upper()}.gguf"
    head = out_dir / HEAD_FILE_NAME
    try:
        stamp = json.loads((out_dir / TINY_STAMP).read_text())
    except (OSError, ValueError):
        return None
    if stamp != tiny_stamp(seed, outtype, arch) or not lm.is_file() or not mm.is_file():
        return None
    if has_head:
        return ModelFiles(lm, mm, head) if head.is_file() else None
    return ModelFiles(lm, mm)


def tiny_stamp(seed: int, outtype: str, arch: str = TINY_ARCH) -> dict[str, object]:
    """What a tiny build records of itself, so that a build with other arguments is not reused."""
    # version 2: the checkpoint has the multi-vector head, and the folder its head file; 3: bfloat16 weights
    stamp: dict[str, object] = {"seed": seed, "outtype": outtype, "version": 3}
    if arch != TINY_ARCH:  # the default's stamp as before, so that existing builds stay valid
        stamp["arch"] = arch
    return stamp
