"""Each patch in llama.cpp/patches has a test here that fails without it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pytest

from docvec import ModelFiles
from docvec._model._native import LlamaContext, LlamaModel, backend
from docvec._tools._convert import convert_checkpoint
from docvec._tools._toolchain import LlamaCppSource

from .helpers import page_image

if TYPE_CHECKING:
    from docvec_reference.jina_v4 import ReferenceEmbedder

ROOT = Path(__file__).resolve().parents[1]

_EMBED = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from docvec import Embedder, EmbedSettings, ModelFiles
    from tests.helpers import page_image
    lm, mm = sys.argv[1:3]
    with Embedder(ModelFiles(Path(lm), Path(mm)), EmbedSettings(threads=2)) as emb:
        q = emb.embed_passages(["a passage long enough to fill several 16-row AMX tiles " * 8])
        i = emb.embed_images([page_image(448, 448)])
    print(json.dumps({"q": q[0].tolist(), "i": i[0].tolist()}))
    """
)


def _embed_in_subprocess(files: ModelFiles) -> subprocess.CompletedProcess[str]:
    # a crash in native code must fail this test, not kill the test run
    return subprocess.run(
        [sys.executable, "-c", _EMBED, str(files.language_model), str(files.mmproj)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_quantized_model_on_this_cpu(tiny_files: ModelFiles, tiny_quantized: dict[str, ModelFiles]) -> None:
    """0001-amx-tile-config-dead-stores.patch: quantized models on AMX CPUs (Intel Sapphire Rapids and later).

    Unpatched, ggml's AMX matmul loads a tile configuration whose stores GCC deleted and dies with
    SIGSEGV on the first multi-token batch; on CPUs without AMX this path is not taken and the test
    checks quantized embeddings in general.
    """
    ref = _embed_in_subprocess(tiny_files)
    assert ref.returncode == 0, ref.stderr[-2000:]
    want = json.loads(ref.stdout)
    assert set(tiny_quantized) == {"Q8_0", "Q4_K_M"}
    for quant, files in tiny_quantized.items():
        r = _embed_in_subprocess(files)
        assert r.returncode == 0, f"{quant}: exit {r.returncode}\n{r.stderr[-2000:]}"
        got = json.loads(r.stdout)
        for k in ("q", "i"):
            # close to the F16 model: a wrong tile shape would give garbage, not a small error
            assert float(np.dot(got[k], want[k])) > 0.9, (quant, k)


def test_patches_are_applied_to_the_built_source(cache_dir: Path) -> None:
    src = LlamaCppSource.in_cache(cache_dir)
    mmq = (src.vendor / "ggml" / "src" / "ggml-cpu" / "amx" / "mmq.cpp").read_text()
    assert '__asm__ __volatile__("" : : "r"(&tc) : "memory");' in mmq
    graph = (src.vendor / "src" / "models" / "qwen2vl.cpp").read_text()
    assert "cparams.embeddings && pooling_type == LLAMA_POOLING_TYPE_NONE" in graph
    cpu = (src.vendor / "ggml" / "src" / "ggml-cpu" / "ggml-cpu.c").read_text()
    assert "ggml_compute_forward_mul_mat_k_tail(params, src0" in cpu
    ops = (src.vendor / "ggml" / "src" / "ggml-cpu" / "ops.cpp").read_text()
    assert "ggml_cpu_fp16_to_fp32(mp_row + ic, m32, kv_tile);" in ops
    assert "ggml_cpu_fp16_to_fp32(k_f16 + dk0, k_row, nk);" in ops
    assert "ggml_amx_bf16_mul_mat(params, src0, src1, dst);" in cpu
    assert "ggml_fa_amx_scores(KQ, " in ops
    mtmd = (src.vendor / "tools" / "mtmd" / "clip-impl.h").read_text()
    assert "bool separate_images = false;" in mtmd
    vec = (src.vendor / "ggml" / "src" / "ggml-cpu" / "vec.cpp").read_text()
    assert "void ggml_vec_gelu_f32(const int n, float * y, const float * x) {" in vec
    patches = sorted(p.name for p in (ROOT / "llama.cpp" / "patches").glob("*.patch"))
    assert patches == [
        "0001-amx-tile-config-dead-stores.patch",
        "0002-qwen-vl-embeddings-without-output-head.patch",
        "0003-cpu-mul-mat-k-tail-through-tinyblas.patch",
        "0004-cpu-flash-attn-mask-scan-simd.patch",
        "0005-cpu-flash-attn-key-pack-and-row-max-simd.patch",
        "0006-cpu-bf16-mul-mat-on-amx-tiles.patch",
        "0007-cpu-gelu-in-f32.patch",
        "0008-mtmd-batch-qwen-vl-images.patch",
        "0009-cpu-bf16-flash-attention-on-amx-tiles.patch",
    ]


def test_patches_add_no_docvec_names_to_llama_cpp() -> None:
    """Each patch stays upstreamable: the code it adds names neither docvec nor our patch numbers (its
    header, above the diff, says why it exists and where it is tested)."""
    for patch in sorted((ROOT / "llama.cpp" / "patches").glob("*.patch")):
        body = patch.read_text().partition("\n--- a/")[2]
        added = [line for line in body.splitlines() if line.startswith("+") and not line.startswith("+++")]
        assert added, patch.name
        named = [line for line in added if "docvec" in line.lower() or re.search(r"patch 0\d{3}", line)]
        assert not named, (patch.name, named)


@pytest.mark.parametrize("files", ["tiny_files", "qwen3vl_files"])
def test_embeddings_context_computes_no_logits(files: str, request: pytest.FixtureRequest) -> None:
    """0002-qwen-vl-embeddings-without-output-head.patch: no output head, no logits buffer, for both
    architectures (qwen2vl: jina-embeddings-v4; qwen3vl: Qwen3-VL-Embedding).

    Unpatched, every decoded token is also multiplied by the n_vocab x n_embd output head and its logits
    are copied out; llama_get_logits then points at them. Patched, the graph ends at the hidden states,
    which stay what they were (the parity tests compare them with the PyTorch reference).
    """
    ll, _ = backend()
    model = LlamaModel(request.getfixturevalue(files).language_model)
    ctx = LlamaContext(model, n_ctx=256, n_batch=64, threads=2)
    try:
        tokens = model.tokenize("a page about the output head " * 4)
        states = ctx.decode_tokens(tokens, 0)
        assert states.shape == (len(tokens), model.n_embd)
        assert np.isfinite(states).all() and float(np.abs(states).max()) > 0
        assert not ll.llama_get_logits(ctx.handle), "the context computed logits nobody reads"
    finally:
        ctx.close()
        model.close()


_EMBED_LOGGED = textwrap.dedent(
    """
    import json, logging, sys
    from pathlib import Path
    from docvec import Embedder, EmbedSettings, ModelFiles
    from tests.helpers import page_image
    lines = []
    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())
    logging.getLogger("docvec.llama").addHandler(Keep())
    logging.getLogger("docvec.llama").setLevel(logging.DEBUG)
    lm, mm = sys.argv[1:3]
    with Embedder(ModelFiles(Path(lm), Path(mm)), EmbedSettings(threads=2)) as emb:
        i = emb.embed_images([page_image(448, 448)])
        q = emb.embed_queries(["a query long enough to make a batch of several tokens"])
    marks = [s for s in lines if s.startswith("ggml-cpu: ")]
    print(json.dumps({"i": i[0].tolist(), "q": q[0].tolist(), "marks": marks}))
    """
)


def _embed_logged(files: ModelFiles) -> dict[str, Any]:
    """An image and a query embedded in a fresh process, with the debug lines our patches log there once."""
    r = subprocess.run(
        [sys.executable, "-c", _EMBED_LOGGED, str(files.language_model), str(files.mmproj)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def _match_reference(got: dict[str, Any], ref: ReferenceEmbedder, bar: float) -> None:
    """The image and the query of `_embed_logged` against the reference's, pooled cosine at least bar."""
    want_i = ref.embed_images([page_image(448, 448)])[0]
    want_q = ref.embed_queries(["a query long enough to make a batch of several tokens"])[0]
    assert float(np.dot(got["i"], want_i)) >= bar
    assert float(np.dot(got["q"], want_q)) >= bar


def test_flash_attention_mask_scan(tiny_files: ModelFiles) -> None:
    """0004-cpu-flash-attn-mask-scan-simd.patch: the tiled flash-attention kernel's mask scan.

    A pure speed-up (a scalar table lookup per mask element became SIMD conversion): the tiny model's
    windowed vision blocks take the patched path, which logs its mark once; the values are those the
    parity tests compare with the PyTorch reference.
    """
    got = _embed_logged(tiny_files)
    assert any("flash attention reads its mask with SIMD" in m for m in got["marks"]), got["marks"]


def test_flash_attention_packs_keys_with_simd(qwen3vl_files: ModelFiles) -> None:
    """0005-cpu-flash-attn-key-pack-and-row-max-simd.patch: the tiled kernel's key pack and row maxima.

    A pure speed-up (a table lookup per key element and a scalar chain per score row became SIMD):
    the tiny Qwen3-VL's vision encoder, full attention over F16 keys, takes the patched path, which logs
    its mark once; the values are those the parity tests compare with the PyTorch reference.
    """
    got = _embed_logged(qwen3vl_files)
    assert any("packs F16 keys and takes row maxima with SIMD" in m for m in got["marks"]), got["marks"]


def _amx_bf16_built_and_present() -> bool:
    """Whether this wheel was compiled for AMX (the build uses -march=native) and this CPU has AMX-BF16."""
    import llama_cpp

    built = "AMX_INT8 = 1" in llama_cpp.llama_print_system_info().decode()
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text().split() if cpuinfo.is_file() else []
    return built and "amx_bf16" in flags and "amx_tile" in flags


def test_bf16_matmul_on_amx_tiles(tiny_bf16: ModelFiles, reference: ReferenceEmbedder) -> None:
    """0006-cpu-bf16-mul-mat-on-amx-tiles.patch: BF16 products on Intel AMX's tile unit.

    On a CPU with AMX the tiny BF16 model's products (k and weight rows at least 32) take the tile kernel,
    which logs its mark once (missing without the patch), a query's too; on a CPU without
    AMX the mark must be absent (tinyBLAS computes them, as before). Either way the embeddings match
    the PyTorch reference as closely as BF16 GGUFs do.
    """
    got = _embed_logged(tiny_bf16)
    on_tiles = any("BF16 mul_mat on AMX tiles" in m for m in got["marks"])
    assert on_tiles == _amx_bf16_built_and_present(), got["marks"]
    # the query's dozen tokens make one 16-token block, multiplied alone (before: tinyBLAS, off the tiles)
    lone = any("AMX tiles with a lone 16-token block" in m for m in got["marks"])
    assert lone == _amx_bf16_built_and_present(), got["marks"]
    _match_reference(got, reference, 0.9999)


def test_bf16_attention_on_amx_tiles(tiny_bf16: ModelFiles, reference: ReferenceEmbedder) -> None:
    """0009-cpu-bf16-flash-attention-on-amx-tiles.patch: a BF16 vision encoder attends in BF16.

    A BF16 mmproj computed on the CPU casts its keys and values to BF16 (F16 before), and the CPU's
    tiled flash attention multiplies them on AMX tiles where the CPU has them: it logs its mark once
    (missing without the patch; absent on a CPU without AMX, where BF16 keys and values are widened to
    F32 as F16 ones were). The embeddings match the PyTorch reference as closely as BF16 GGUFs do.
    """
    got = _embed_logged(tiny_bf16)
    on_tiles = any("flash attention over BF16 keys and values on AMX tiles" in m for m in got["marks"])
    assert on_tiles == _amx_bf16_built_and_present(), got["marks"]
    _match_reference(got, reference, 0.9999)


_INT8_AFTER_BF16 = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from docvec import Embedder, EmbedSettings, ModelFiles
    from tests.helpers import page_image
    q8, bf16 = (ModelFiles(Path(a), Path(b)) for a, b in (sys.argv[1:3], sys.argv[3:5]))
    text = ["a passage long enough to fill several 16-row AMX tiles " * 8]
    out = []
    for files in (q8, bf16, q8):
        with Embedder(files, EmbedSettings(threads=2)) as emb:
            v = emb.embed_passages(text)[0].tolist() + emb.embed_images([page_image(448, 448)])[0].tolist()
            out.append(v)
    print(json.dumps(out))
    """
)


def test_amx_int8_after_bf16_tiles(tiny_bf16: ModelFiles, tiny_quantized: dict[str, ModelFiles]) -> None:
    """0006 keeps the tile configuration of ggml's AMX-INT8 kernels, which load it once per thread.

    A Q8_0 model, then a BF16 one (patch 0006's tiles), then the Q8_0 model again, in the same threads:
    with the tiles released after a BF16 product instead, the second Q8_0 product died with SIGILL on
    an AMX CPU. The second Q8_0 vectors must equal the first. On a CPU without AMX neither kernel runs
    and the test checks that three models in turn give the same vectors.
    """
    q8 = tiny_quantized["Q8_0"]
    args = [str(q8.language_model), str(q8.mmproj), str(tiny_bf16.language_model), str(tiny_bf16.mmproj)]
    r = subprocess.run(
        [sys.executable, "-c", _INT8_AFTER_BF16, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-2000:]}"
    first, _, again = json.loads(r.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(again, first, atol=1e-6)


def _odd_width_model(
    cache_dir: Path, tmp_path: Path, outtype: Literal["f16", "bf16"]
) -> tuple[ModelFiles, ReferenceEmbedder]:
    """The tiny Qwen2.5-VL with MLPs 100 (vision) and 200 (text) wide, as outtype GGUFs, and its reference.

    Neither width is a multiple of 32 or 64, as Qwen2.5-VL-3B's 3420-wide vision MLP is not.
    """
    import dataclasses

    import torch

    from docvec._tools._tiny_checkpoint import build_checkpoint
    from docvec._tools._tiny_qwen25vl import Qwen25VLGeometry
    from docvec_reference.jina_v4 import ReferenceEmbedder

    src = LlamaCppSource.in_cache(cache_dir)
    geometry = dataclasses.replace(Qwen25VLGeometry.tiny(), vision_intermediate=100, text_intermediate=200)
    hf = build_checkpoint(tmp_path / "hf", src.qwen2_vocab, geometry, cache_dir=cache_dir / "tokenizers")
    files = convert_checkpoint(hf, tmp_path, source=src, name="odd", outtype=outtype).main
    return files, ReferenceEmbedder(hf, dtype=torch.float32, threads=2)


def test_odd_width_matmul_through_tinyblas(cache_dir: Path, tmp_path: Path) -> None:
    """0003-cpu-mul-mat-k-tail-through-tinyblas.patch: F16 products with a k that is not a multiple of 64.

    Qwen2.5-VL-3B's vision MLP is 3420 wide; unpatched, its down projection skipped tinyBLAS for ggml's
    vec_dot loop. This tiny model has MLPs 100 (vision) and 200 (text) wide: patched, the split path logs
    its one debug line (missing without the patch), and the embeddings still match the PyTorch reference.
    """
    files, ref = _odd_width_model(cache_dir, tmp_path, "f16")
    got = _embed_logged(files)
    assert any("through tinyBLAS" in m for m in got["marks"]), got["marks"]
    _match_reference(got, ref, 0.99999)


def test_bf16_matmul_tails_on_amx_tiles(cache_dir: Path, tmp_path: Path) -> None:
    """0006's row and k tails: BF16 products whose widths are not multiples of 32 take the tiles too.

    The 100- and 200-wide MLPs make both kinds (weight rows, and k, of 100 and 200): on an AMX CPU they log
    the tails' mark (missing when such products stayed off the tiles, as jina-v4's 3420-wide vision MLP did),
    and the embeddings match the PyTorch reference as closely as BF16 GGUFs do. On a CPU without AMX the
    mark must be absent.
    """
    files, ref = _odd_width_model(cache_dir, tmp_path, "bf16")
    got = _embed_logged(files)
    on_tiles = any("AMX tiles with row or k tails" in m for m in got["marks"])
    assert on_tiles == _amx_bf16_built_and_present(), got["marks"]
    _match_reference(got, ref, 0.9999)


def test_gelu_in_f32(colqwen35_dir: Path) -> None:
    """Patch 0007: ggml's CPU GELU of F32 activations is computed in F32, not read from its F16 table. The
    vision tower's GELUs feed every image token of the tiny ColQwen3.5, whose language model passes on what
    they round: a wide page's token vectors against colpali-engine's reach a least per-token cosine of
    0.9980 without the patch and 0.9993 with it (the parity bar is 0.999)."""
    from docvec import Embedder, EmbedSettings
    from docvec._model._registry import find_tiny_model
    from docvec_reference.colqwen import ColQwenReference

    image = page_image(900, 300)
    want = ColQwenReference(colqwen35_dir / "hf", threads=2).page(image)[0]
    files = find_tiny_model(colqwen35_dir, arch="colqwen3.5")
    assert files is not None
    with Embedder(files, EmbedSettings(threads=2, max_pixels=1792 * 32 * 32)) as emb:
        got = emb.embed_images_multi([image])[1][0]
    cos = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    assert float(cos.min()) >= 0.999, float(cos.min())
