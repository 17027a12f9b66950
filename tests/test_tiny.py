"""docvec.tiny: the random-weight Qwen2.5-VL checkpoint and the Qwen2 tokenizer rebuilt for it."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from docvec import ConfigError
from docvec._errors import ToolError
from docvec._model._head import KEYS as HEAD_KEYS
from docvec._tools._qwen_tokenizer import VOCAB_SIZE
from docvec._tools._tiny_checkpoint import build_checkpoint
from docvec._tools._tiny_qwen3vl import Qwen3VLGeometry
from docvec._tools._tiny_qwen25vl import ADDED_TOKENS, HEAD_DIM, IMAGE_MEAN, IMAGE_STD, Qwen25VLGeometry
from docvec._tools._toolchain import LlamaCppSource

SEP = "\n__ggml_vocab_test__\n"
TINY = Qwen25VLGeometry.tiny()


def llama_cpp_vectors(vocab: Path) -> list[tuple[str, list[int]]]:
    """llama.cpp's tokenizer test cases: (text, expected ids), read as test-tokenizer-0 reads them."""
    raw = vocab.with_name(vocab.name + ".inp").read_bytes().decode("utf-8")
    texts = raw.split(SEP)
    assert texts[-1] == ""  # every case, the last included, ends with the separator
    lines = vocab.with_name(vocab.name + ".out").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(texts) - 1
    return [(t, [int(i) for i in line.split()]) for t, line in zip(texts[:-1], lines, strict=True)]


def test_tokenizer_matches_llama_cpp_vectors(llama_source: LlamaCppSource, tiny_hf: Path) -> None:
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    cases = llama_cpp_vectors(llama_source.qwen2_vocab)
    assert len(cases) >= 40
    raw = Tokenizer.from_file(str(tiny_hf / "tokenizer.json"))
    hf = AutoTokenizer.from_pretrained(tiny_hf)
    for text, expected in cases:
        assert raw.encode(text, add_special_tokens=False).ids == expected, repr(text)
        assert hf.encode(text, add_special_tokens=False) == expected, repr(text)


def test_added_tokens_have_the_real_ids(tiny_hf: Path) -> None:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(tiny_hf)
    ids = {content: 151643 + i for i, (content, _) in enumerate(ADDED_TOKENS)}
    assert ids["<|endoftext|>"] == 151643
    assert ids["<|im_start|>"] == 151644
    assert ids["<|vision_start|>"] == 151652
    assert ids["<|vision_end|>"] == 151653
    assert ids["<|image_pad|>"] == 151655
    assert ids["<|file_sep|>"] == 151664
    for content, token_id in ids.items():
        assert hf.convert_tokens_to_ids(content) == token_id
    assert len(hf) == 151665
    prompt = "<|im_start|>user\n<|vision_start|><|image_pad|><|image_pad|><|vision_end|>Hi<|im_end|>\n"
    assert hf.encode(prompt, add_special_tokens=False)[:6] == [151644, 872, 198, 151652, 151655, 151655]
    assert hf.encode("Query: hello", add_special_tokens=False) == [2859, 25, 23811]  # no BOS


def test_config_has_the_real_ids_and_image_geometry(tiny_hf: Path) -> None:
    config = json.loads((tiny_hf / "config.json").read_text())
    assert config["model_type"] == "qwen2_5_vl"
    assert config["architectures"] == ["Qwen2_5_VLForConditionalGeneration"]
    assert (config["image_token_id"], config["video_token_id"]) == (151655, 151656)
    assert (config["vision_start_token_id"], config["vision_end_token_id"]) == (151652, 151653)
    text, vision = config["text_config"], config["vision_config"]
    assert text["vocab_size"] == VOCAB_SIZE == 151936
    assert text["rope_parameters"]["mrope_section"] == [2, 3, 3]
    assert (vision["patch_size"], vision["spatial_merge_size"], vision["temporal_patch_size"]) == (14, 2, 2)
    assert vision["in_channels"] == 3
    assert vision["out_hidden_size"] == text["hidden_size"] == 64
    assert vision["window_size"] == 112
    assert vision["fullatt_block_indexes"] == [1, 3]

    pre = json.loads((tiny_hf / "preprocessor_config.json").read_text())
    assert (pre["min_pixels"], pre["max_pixels"]) == (3136, 602112)
    assert (pre["patch_size"], pre["merge_size"], pre["temporal_patch_size"]) == (14, 2, 2)
    assert pre["image_mean"] == list(IMAGE_MEAN) == [0.48145466, 0.4578275, 0.40821073]
    assert pre["image_std"] == list(IMAGE_STD) == [0.26862954, 0.26130258, 0.27577711]
    tok = json.loads((tiny_hf / "tokenizer_config.json").read_text())
    assert tok["tokenizer_class"] == "Qwen2Tokenizer"
    assert tok["bos_token"] is None and tok["add_bos_token"] is False


def test_same_seed_same_bytes_other_seed_other_weights(
    tmp_path: Path, llama_source: LlamaCppSource, tokenizer_cache: Path, tiny_hf: Path
) -> None:
    again = build_checkpoint(
        tmp_path / "again", llama_source.qwen2_vocab, TINY, seed=0, cache_dir=tokenizer_cache
    )
    other = build_checkpoint(
        tmp_path / "other", llama_source.qwen2_vocab, TINY, seed=1, cache_dir=tokenizer_cache
    )
    names = sorted(p.name for p in tiny_hf.iterdir())
    assert "model.safetensors" in names
    assert sorted(p.name for p in again.iterdir()) == names
    for name in names:
        assert (again / name).read_bytes() == (tiny_hf / name).read_bytes(), name
    assert (other / "model.safetensors").read_bytes() != (tiny_hf / "model.safetensors").read_bytes()
    assert (other / "config.json").read_bytes() == (tiny_hf / "config.json").read_bytes()


def test_transformers_loads_every_weight(tiny_hf: Path) -> None:
    import torch
    from safetensors import safe_open
    from transformers import Qwen2_5_VLForConditionalGeneration

    model, info = Qwen2_5_VLForConditionalGeneration.from_pretrained(tiny_hf, output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"]
    # jina-embeddings-v4's head is the only weight that is not Qwen2.5-VL's: its model loads it, this one not
    assert set(info["unexpected_keys"]) == set(HEAD_KEYS)
    inner = model.model
    assert model.lm_head.weight.data_ptr() == inner.language_model.embed_tokens.weight.data_ptr()  # tied
    with safe_open(str(tiny_hf / "model.safetensors"), "pt") as f:
        q_bias = f.get_tensor("model.layers.0.self_attn.q_proj.bias")
        ln_q = f.get_tensor("visual.merger.ln_q.weight")
        embed = f.get_tensor("model.embed_tokens.weight")
    assert torch.equal(q_bias, inner.language_model.layers[0].self_attn.q_proj.bias)
    assert torch.equal(ln_q, inner.visual.merger.ln_q.weight)
    # sane scales: unit-variance embeddings, norm weights around 1, non-zero biases
    assert 0.95 < float(embed.std()) < 1.05
    assert 0.8 < float(ln_q.mean()) < 1.2
    assert float(q_bias.abs().mean()) > 0.01


def test_the_checkpoint_has_a_multi_vector_head_of_linear_scale(tiny_hf: Path) -> None:
    import torch
    from safetensors import safe_open

    with safe_open(str(tiny_hf / "model.safetensors"), "pt") as f:
        weight, bias = (f.get_tensor(k) for k in HEAD_KEYS)
        norm = f.get_tensor("model.norm.weight")
    assert weight.shape == (HEAD_DIM, 64) and bias.shape == (HEAD_DIM,) and weight.dtype == torch.bfloat16
    weight, bias, norm = weight.float(), bias.float(), norm.float()
    assert 0.9 / 8 < float(weight.std()) < 1.1 / 8  # N(0, 1/fan_in): fan_in 64
    assert 0.05 < float(bias.std()) < 0.15
    # on states of the final norm's scale, every output is of order one and the 128 outputs are not one
    # direction: token vectors differ, so MaxSim has something to measure
    states = torch.randn(50, 64, generator=torch.Generator().manual_seed(0)) * norm
    out = torch.nn.functional.normalize(states @ weight.T + bias, dim=-1)
    cos = out @ out.T
    off_diagonal = cos[~torch.eye(50, dtype=torch.bool)]
    assert float(off_diagonal.abs().mean()) < 0.3


def test_geometry_checks_and_the_3b_size() -> None:
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    tiny = Qwen25VLGeometry.tiny()
    assert tiny.out_hidden == tiny.text_hidden == 64
    with pytest.raises(ConfigError, match="mrope_section"):
        Qwen25VLGeometry(**{**tiny.__dict__, "mrope_section": (2, 2, 2)})
    with pytest.raises(ConfigError, match="equally spaced"):
        Qwen25VLGeometry(**{**tiny.__dict__, "fullatt_block_indexes": (1, 2)})
    with pytest.raises(ConfigError, match="dtype"):
        build_checkpoint(Path("unused"), Path("unused"), tiny, dtype="int8")

    big = Qwen25VLGeometry.qwen25vl_3b()
    assert big.fullatt_block_indexes == (7, 15, 23, 31)
    with torch.device("meta"):
        model = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(**big.hf_config("bfloat16")))
    n_params = sum(p.numel() for p in model.parameters())  # the tied lm_head counts once
    assert 3.70e9 < n_params < 3.80e9


def _gguf_string(path: Path, key: str) -> str:
    """A string value from a GGUF header, without parsing the 151936-entry token list (GGUFReader: ~8 s)."""
    with path.open("rb") as f:
        head = f.read(1 << 20)
    needle = struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", 8)  # 8: GGUF string type
    at = head.index(needle) + len(needle)
    (length,) = struct.unpack_from("<Q", head, at)
    return head[at + 8 : at + 8 + length].decode()


@pytest.mark.slow
def test_converter_accepts_the_checkpoint(
    tmp_path: Path, llama_source: LlamaCppSource, tiny_hf: Path
) -> None:
    converter = str(llama_source.converter)
    lm, mmproj = tmp_path / "lm.gguf", tmp_path / "mmproj.gguf"
    for args in ([str(tiny_hf), "--outfile", str(lm)], [str(tiny_hf), "--mmproj", "--outfile", str(mmproj)]):
        done = subprocess.run(
            [sys.executable, converter, *args, "--outtype", "f16"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    # the pre-tokenizer hash check recognised the rebuilt tokenizer as Qwen2's
    assert _gguf_string(lm, "tokenizer.ggml.pre") == "qwen2"
    assert _gguf_string(lm, "general.architecture") == "qwen2vl"
    assert _gguf_string(mmproj, "clip.projector_type") == "qwen2.5vl_merger"


# --------------------------------------------------------------------------------------------- Qwen3-VL


def test_qwen3vl_tokenizer_has_the_real_added_tokens(qwen3vl_dir: Path) -> None:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(qwen3vl_dir / "hf")
    assert len(hf) == 151669
    want = {"<|im_start|>": 151644, "<|image_pad|>": 151655, "<|file_sep|>": 151664}
    want |= {"<tool_response>": 151665, "</tool_response>": 151666, "<think>": 151667, "</think>": 151668}
    for content, token_id in want.items():
        assert hf.convert_tokens_to_ids(content) == token_id, content
    # the four new ones are plain added tokens, as in Qwen3-VL's tokenizer_config.json
    tok = json.loads((qwen3vl_dir / "hf" / "tokenizer_config.json").read_text())
    assert [tok["added_tokens_decoder"][str(i)]["special"] for i in range(151665, 151669)] == [False] * 4


def test_qwen3vl_config_and_processor(qwen3vl_dir: Path) -> None:
    config = json.loads((qwen3vl_dir / "hf" / "config.json").read_text())
    assert config["model_type"] == "qwen3_vl"
    assert config["architectures"] == ["Qwen3VLForConditionalGeneration"]
    text, vision = config["text_config"], config["vision_config"]
    assert (text["hidden_size"], text["num_hidden_layers"], text["head_dim"]) == (64, 4, 128)
    assert text["rope_parameters"]["mrope_section"] == [24, 20, 20]
    assert text["rope_parameters"]["mrope_interleaved"] is True
    assert (vision["patch_size"], vision["spatial_merge_size"], vision["depth"]) == (16, 2, 5)
    assert vision["deepstack_visual_indexes"] == [1, 2, 3]
    assert vision["hidden_act"] == "gelu_pytorch_tanh"
    pre = json.loads((qwen3vl_dir / "hf" / "preprocessor_config.json").read_text())
    assert pre["image_mean"] == pre["image_std"] == [0.5, 0.5, 0.5]
    assert pre["size"] == {"longest_edge": 1800 * 32 * 32, "shortest_edge": 4 * 32 * 32}


def test_qwen3vl_weights_load_and_convert_to_deepstack_gguf(qwen3vl_dir: Path) -> None:
    from transformers import Qwen3VLForConditionalGeneration

    _, info = Qwen3VLForConditionalGeneration.from_pretrained(qwen3vl_dir / "hf", output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"] and not info["unexpected_keys"]
    lm = next(qwen3vl_dir.glob("tiny-qwen3vl-*.gguf"))
    mmproj = next(qwen3vl_dir.glob("mmproj-tiny-qwen3vl-*.gguf"))
    assert _gguf_string(lm, "general.architecture") == "qwen3vl"
    assert _gguf_string(lm, "tokenizer.ggml.pre") == "qwen2"
    assert _gguf_string(mmproj, "clip.projector_type") == "qwen3vl_merger"
    assert not (qwen3vl_dir / "multivector-head.gguf").exists()


def test_qwen3vl_geometries() -> None:
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    tiny = Qwen3VLGeometry.tiny()
    with pytest.raises(ConfigError, match="mrope_section"):
        Qwen3VLGeometry(**{**tiny.__dict__, "mrope_section": (2, 2, 2)})
    with pytest.raises(ConfigError, match="more than 3 language-model"):
        Qwen3VLGeometry(**{**tiny.__dict__, "text_layers": 3})
    with pytest.raises(ConfigError, match="dtype"):
        build_checkpoint(Path("unused"), Path("unused"), tiny, dtype="int8")
    # the real 2B: 2.13 B parameters (Qwen3-VL-2B-Instruct's model card says 2B), tied embeddings
    with torch.device("meta"):
        model = Qwen3VLForConditionalGeneration(Qwen3VLConfig(**Qwen3VLGeometry.qwen3vl_2b().hf_config()))
    n_params = sum(p.numel() for p in model.parameters())
    assert 2.0e9 < n_params < 2.3e9, n_params


def test_an_embedding_checkpoint_converts_as_the_official_one_is_saved(
    qwen3vl_dir: Path, llama_source: LlamaCppSource, tmp_path: Path
) -> None:
    """Saved as Qwen3VLForEmbedding (refused by the pinned converter), in a folder whose name and README
    say reranker (which makes the converter write a RANK-pooled GGUF without the LM head): docvec's
    conversion gives the plain qwen3vl language model, the same tensors as the original's."""
    from docvec._tools._convert import convert_checkpoint

    hf = tmp_path / "Qwen3-VL-Reranker-lookalike"
    hf.mkdir()
    for f in (qwen3vl_dir / "hf").iterdir():
        (hf / f.name).symlink_to(f)
    config = json.loads((qwen3vl_dir / "hf" / "config.json").read_text())
    (hf / "config.json").unlink()
    (hf / "config.json").write_text(json.dumps({**config, "architectures": ["Qwen3VLForEmbedding"]}))
    (hf / "README.md").write_text(
        "# Qwen3-VL-Embedding\n\nPair it with a second stage.\n\n# Qwen3-VL-Reranker\n"
    )
    files = convert_checkpoint(hf, tmp_path / "out", source=llama_source, name="e", outtype="f16").main
    assert _gguf_string(files.language_model, "general.architecture") == "qwen3vl"
    assert _gguf_string(files.mmproj, "clip.projector_type") == "qwen3vl_merger"
    original = next(qwen3vl_dir.glob("tiny-qwen3vl-F16.gguf"))
    from gguf import GGUFReader

    got, want = GGUFReader(files.language_model), GGUFReader(original)
    assert [t.name for t in got.tensors] == [t.name for t in want.tensors]
    assert "cls.output.weight" not in {t.name for t in got.tensors}
    assert (hf / "config.json").read_text().count("Qwen3VLForEmbedding") == 1  # the folder is left alone


@pytest.mark.parametrize("model", ["tiny_dir", "qwen3vl_dir"])
def test_a_q8_0_vision_encoder_loads_and_stays_close(
    model: str, request: pytest.FixtureRequest, llama_source: LlamaCppSource, tmp_path: Path
) -> None:
    """`docvec models convert --mmproj-outtype q8_0`, for both families: mtmd loads the Q8_0 mmproj, and
    page vectors stay within 0.999 of the F16 mmproj's (measured: 0.99983-0.99986 on six shapes)."""
    import numpy as np
    from gguf import GGUFReader

    from docvec import Embedder, EmbedSettings, ModelFiles
    from docvec._tools._convert import convert_checkpoint

    from .helpers import SHAPES, report, shape_image

    folder: Path = request.getfixturevalue(model)
    files = convert_checkpoint(
        folder / "hf", tmp_path, source=llama_source, name="m", outtype="f16", mmproj_outtype="q8_0"
    ).main
    assert files.mmproj.name == "mmproj-m-Q8_0.gguf"
    types = {t.tensor_type.name for t in GGUFReader(files.mmproj).tensors}
    assert "Q8_0" in types
    f16 = ModelFiles(files.language_model, next(folder.glob("mmproj-*-F16.gguf")))
    images = [shape_image(n) for n in SHAPES]
    with Embedder(files, EmbedSettings(threads=2)) as q8, Embedder(f16, EmbedSettings(threads=2)) as ref:
        cos = np.sum(q8.embed_images(images) * ref.embed_images(images), axis=1)
    report(f"{model}: Q8_0 mmproj against F16, pooled cosine (min of six shapes)", float(cos.min()))
    assert cos.min() > 0.999


@pytest.mark.parametrize("model", ["tiny_dir", "qwen3vl_dir"])
def test_a_published_bf16_mmproj_quantizes_as_the_converter_would(
    model: str, request: pytest.FixtureRequest, llama_source: LlamaCppSource, tmp_path: Path
) -> None:
    """`pull --mmproj q8_0` quantizes the published BF16 mmproj (jina-v4 ships no other): the file equals
    the converter's own --outtype q8_0 conversion of the bfloat16 checkpoint, byte for byte. A language
    model or an mmproj already quantized is refused, naming the file."""
    from docvec._tools._convert import _converter_view, _run_converter
    from docvec._tools._mmproj_quant import quantize_mmproj

    hf = request.getfixturevalue(model) / "hf"
    with _converter_view(hf, tmp_path) as view:
        bf16 = _run_converter(llama_source, view, tmp_path / "mmproj-BF16.gguf", "bf16", mmproj=True).path
        want = _run_converter(llama_source, view, tmp_path / "mmproj-Q8_0.gguf", "q8_0", mmproj=True).path
        f16 = _run_converter(llama_source, view, tmp_path / "mmproj-F16.gguf", "f16", mmproj=True).path
    got = quantize_mmproj(bf16, tmp_path / "out" / "mmproj-requantized-Q8_0.gguf")
    assert got.read_bytes() == want.read_bytes()
    # from F16, the tensor types are the converter's too (its patch embedding is F16 there, F32 in Q8_0)
    from gguf import GGUFReader

    def types(path: Path) -> dict[str, str]:
        return {t.name: t.tensor_type.name for t in GGUFReader(path).tensors}

    assert types(f16)["v.patch_embd.weight"] == "F16"
    assert types(quantize_mmproj(f16, tmp_path / "from-f16.gguf")) == types(want)
    assert sorted(p.name for p in got.parent.iterdir()) == [got.name]  # no part file left
    with pytest.raises(ToolError, match=r"mmproj-Q8_0.gguf: only an F16 or BF16 mmproj .* Q8_0"):
        quantize_mmproj(want, tmp_path / "again.gguf")
    lm = next(request.getfixturevalue(model).glob("tiny-*-F16.gguf"))
    with pytest.raises(ToolError, match=f"{lm.name}: not a vision encoder"):
        quantize_mmproj(lm, tmp_path / "lm.gguf")
    assert not (tmp_path / "again.gguf").exists() and not (tmp_path / "lm.gguf").exists()


def test_every_tiny_architecture_is_in_the_help() -> None:
    from typer.testing import CliRunner

    from docvec._cli import app
    from docvec._model._registry import TINY_ARCHES

    r = CliRunner().invoke(app, ["models", "tiny", "--help"], env={"COLUMNS": "80"})
    text = " ".join(r.output.replace("│", " ").split())
    assert r.exit_code == 0 and all(f"{arch} (" in text for arch in TINY_ARCHES), text


def test_colqwen35_checkpoint_is_saved_as_colpali_engine_saves_one(colqwen35_dir: Path) -> None:
    from safetensors import safe_open

    from docvec._tools._tiny_qwen35 import ColQwen35Geometry

    config = json.loads((colqwen35_dir / "hf" / "config.json").read_text())
    assert config["architectures"] == ["ColQwen3_5"] and config["dim"] == 320
    assert config["text_config"]["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    with safe_open(colqwen35_dir / "hf" / "model.safetensors", "np") as f:
        tops = {k.split(".")[0] for k in f.keys()}  # noqa: SIM118
    assert tops == {"language_model", "visual", "custom_text_proj"}
    flash = ColQwen35Geometry.flash()
    assert (flash.text_hidden, len(flash.layers), flash.dim) == (1024, 24, 320)
    with pytest.raises(ConfigError, match="mrope_section"):
        ColQwen35Geometry(**{**ColQwen35Geometry.tiny().__dict__, "mrope_section": (4, 2, 2)})


def test_a_colqwen3_in_tomoros_layout_converts_to_the_same_model(
    colqwen3_dir: Path, llama_source: LlamaCppSource, tmp_path: Path
) -> None:
    from gguf import GGUFReader

    from docvec import Embedder, EmbedSettings
    from docvec._model._head import read_head
    from docvec._model._registry import find_tiny_model
    from docvec._tools._convert import convert_checkpoint

    from .helpers import tomoro_layout

    hf = tomoro_layout(colqwen3_dir, tmp_path / "tomoro")
    files = convert_checkpoint(hf, tmp_path / "out", source=llama_source, name="t", outtype="f16").main
    original = find_tiny_model(colqwen3_dir, arch="colqwen3")
    assert original is not None and files.head is not None and original.head is not None
    got, want = GGUFReader(files.language_model), GGUFReader(original.language_model)
    assert [t.name for t in got.tensors] == [t.name for t in want.tensors]
    assert read_head(files.head).kind == "colpali"
    np.testing.assert_array_equal(read_head(files.head).weight, read_head(original.head).weight)
    settings = EmbedSettings(threads=2, max_pixels=64 * 32 * 32)
    with Embedder(files, settings) as ours, Embedder(original, settings) as theirs:
        assert ours.profile.name == "colqwen3"
        np.testing.assert_array_equal(
            ours.embed_queries_multi(["total"])[1][0], theirs.embed_queries_multi(["total"])[1][0]
        )
    assert (
        json.loads((hf / "config.json").read_text())["model_type"] == "colqwen3"
    )  # the folder is left alone
