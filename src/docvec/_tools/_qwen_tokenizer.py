"""The Qwen2 byte-level BPE tokenizer, rebuilt for random-weight test checkpoints.

The vocabulary is the one llama.cpp ships for its tokenizer tests (``models/ggml-vocab-qwen2.gguf``); the
added tokens of Qwen2.5-VL or Qwen3-VL follow at their real ids, so that ``convert_hf_to_gguf.py``
recognises the pre-tokenizer as ``qwen2`` and token ids match the real models'.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

from .._errors import ModelFileError, ToolError
from .._fileio import write_atomic

__all__ = [
    "ID_ENDOFTEXT",
    "ID_IM_END",
    "N_BPE_TOKENS",
    "QWEN2_PRETOKENIZE_REGEX",
    "QWEN3VL_ADDED_TOKENS",
    "QWEN25VL_ADDED_TOKENS",
    "VOCAB_SIZE",
    "qwen_tokenizer_json",
    "tokenizer_files",
]

logger = logging.getLogger("docvec")

#: Rows of the embedding matrix of every Qwen2.5-VL and Qwen3-VL size (more than the tokens in use).
VOCAB_SIZE = 151936
#: Tokens of the BPE vocabulary proper; the added tokens follow from this id on.
N_BPE_TOKENS = 151643

#: Qwen2.5-VL's added tokens in id order from 151643, with whether transformers treats each as special.
QWEN25VL_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
)
#: Qwen3-VL's: Qwen2.5-VL's, then four more (ids 151665-151668), none of them special (its
#: tokenizer_config.json's added_tokens_decoder)
QWEN3VL_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    *QWEN25VL_ADDED_TOKENS,
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

#: the ids of <|endoftext|> and <|im_end|> (the checkpoints' bos/pad and eos)
ID_ENDOFTEXT = N_BPE_TOKENS
ID_IM_END = N_BPE_TOKENS + 2

#: Qwen2's pre-tokenizer split pattern (the one transformers' Qwen2Tokenizer and llama.cpp's ``qwen2`` use).
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"""
    r"""\s+(?!\S)|\s+"""
)

#: Bump when the tokenizer JSON this module writes changes, so that old cache entries are not reused.
_TOKENIZER_FORMAT = 1


def qwen_tokenizer_json(
    vocab_gguf: Path, added: tuple[tuple[str, bool], ...], cache_dir: Path | None = None
) -> str:
    """The ``tokenizer.json`` text of a Qwen-VL tokenizer, rebuilt from llama.cpp's Qwen2 vocabulary with
    the ``added`` tokens (content, special) from id 151643 on.

    ``vocab_gguf`` is ``models/ggml-vocab-qwen2.gguf`` from the llama.cpp source. Reading it takes ~8 s, so
    the result is kept under ``cache_dir`` (when given), keyed by the file's SHA-256 and the added tokens.
    """
    vocab_gguf = Path(vocab_gguf)
    try:
        digest = hashlib.sha256(vocab_gguf.read_bytes()).hexdigest()
    except OSError as exc:
        raise ModelFileError(vocab_gguf, f"cannot read the vocabulary: {exc}") from exc
    # the first file name (Qwen2.5-VL's tokens) is kept, so that caches made before Qwen3-VL stay valid
    tokens = hashlib.sha256(repr(added).encode()).hexdigest()[:8]
    extra = "" if added == QWEN25VL_ADDED_TOKENS else f"-{tokens}"
    cached = None
    if cache_dir is not None:
        cached = Path(cache_dir) / f"qwen25vl-tokenizer-v{_TOKENIZER_FORMAT}-{digest[:20]}{extra}.json"
        if cached.is_file():
            logger.debug("tokenizer from cache %s", cached)
            return cached.read_text(encoding="utf-8")
    text = _build_tokenizer_json(vocab_gguf, added)
    if cached is not None:
        write_atomic(cached, text.encode("utf-8"))
        logger.debug("tokenizer cached at %s", cached)
    return text


def _build_tokenizer_json(vocab_gguf: Path, added: tuple[tuple[str, bool], ...]) -> str:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE

    tokens, merges = _read_bpe_vocab(vocab_gguf)
    vocab = {tok: i for i, tok in enumerate(tokens)}
    if len(vocab) != N_BPE_TOKENS:
        raise ModelFileError(vocab_gguf, f"expected {N_BPE_TOKENS} distinct BPE tokens, got {len(vocab)}")
    tokenizer = Tokenizer(
        BPE(
            vocab=vocab,
            merges=merges,
            dropout=None,
            unk_token=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tokenizer.post_processor = processors.ByteLevel(
        add_prefix_space=False, trim_offsets=False, use_regex=False
    )
    tokenizer.decoder = decoders.ByteLevel()
    for offset, (content, special) in enumerate(added):
        token = AddedToken(
            content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special
        )
        if special:
            tokenizer.add_special_tokens([token])
        else:
            tokenizer.add_tokens([token])
        if tokenizer.token_to_id(content) != N_BPE_TOKENS + offset:
            raise ToolError(f"{content} did not get id {N_BPE_TOKENS + offset}")
    return tokenizer.to_str(pretty=True)


def _read_bpe_vocab(vocab_gguf: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """The normal tokens (in id order) and the merges of a GGUF vocabulary file."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(vocab_gguf)
        token_field = reader.fields["tokenizer.ggml.tokens"]
        type_field = reader.fields["tokenizer.ggml.token_type"]
        merge_field = reader.fields["tokenizer.ggml.merges"]
        pre = reader.fields["tokenizer.ggml.pre"]
    except (KeyError, ValueError, OSError) as exc:
        raise ModelFileError(vocab_gguf, f"not a GGUF vocabulary with BPE tokens and merges: {exc}") from exc
    if bytes(pre.parts[pre.data[0]]).decode() != "qwen2":
        raise ModelFileError(vocab_gguf, "not the qwen2 vocabulary")
    normal = 1  # gguf.TokenType.NORMAL
    types = [int(type_field.parts[t][0]) for t in type_field.data]
    if types[:N_BPE_TOKENS].count(normal) != N_BPE_TOKENS or normal in types[N_BPE_TOKENS:]:
        raise ModelFileError(
            vocab_gguf, f"expected exactly the first {N_BPE_TOKENS} tokens to be normal ones"
        )
    tokens = [bytes(token_field.parts[i]).decode("utf-8") for i in token_field.data[:N_BPE_TOKENS]]
    merges: list[tuple[str, str]] = []
    for i in merge_field.data:
        left, sep, right = bytes(merge_field.parts[i]).decode("utf-8").partition(" ")
        if not sep:
            raise ModelFileError(vocab_gguf, f"malformed merge {left!r}")
        merges.append((left, right))
    return tokens, merges


def tokenizer_files(
    added: tuple[tuple[str, bool], ...], processor_class: str, **extra: Any
) -> dict[str, dict[str, Any]]:
    """``tokenizer_config.json`` and ``special_tokens_map.json`` of a Qwen-VL checkpoint with the ``added``
    tokens, by file name; ``extra`` goes into the tokenizer config."""
    specials = [c for c, special in added[1:] if special]
    config = _tokenizer_config(added, processor_class) | extra
    specials_map = {
        "additional_special_tokens": specials,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
    }
    return {"tokenizer_config.json": config, "special_tokens_map.json": specials_map}


def _tokenizer_config(added: tuple[tuple[str, bool], ...], processor_class: str) -> dict[str, Any]:
    decoder = {
        str(N_BPE_TOKENS + i): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for i, (content, special) in enumerate(added)
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": [c for c, special in added[1:] if special],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "processor_class": processor_class,
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
