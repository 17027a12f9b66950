"""A Q8_0 vision encoder from a published F16 or BF16 mmproj GGUF, as llama.cpp's converter would write it.

llama.cpp's quantizer does not take mmproj files, and jina-embeddings-v4's publisher ships only a BF16
mmproj; the converter's ``--outtype q8_0`` needs the full checkpoint (7.5 GB for jina-v4). The converter's
Q8_0 is gguf-py's ``quants.quantize`` on the float32 values of each tensor it does not keep in float, so a
BF16 mmproj converted from a bfloat16 checkpoint (both families are published in it) holds every bit the
converter reads, and :func:`quantize_mmproj` reproduces its output byte for byte (a test compares them).

Which tensors stay in float follows the pinned converter (``conversion/base.py``, ``prepare_tensors`` and
``MmprojModel.tensor_force_quant``; ``conversion/qwenvl.py``): 1-D tensors, norms and position embeddings
are F32 in every file type, so already F32 in the source and copied; the patch embedding and patch merger
are F32 unless the file type is F16, so an F16 source's are widened to F32; a tensor whose rows are not
whole Q8_0 blocks falls back to F16, as the converter does. Everything else that is F16 or BF16 becomes
Q8_0.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .._errors import ToolError
from .._model._gguf import read_gguf_info

__all__ = ["quantize_mmproj"]

log = logging.getLogger("docvec")

# the tensors the converter forces to F32 unless writing an F16 file (MmprojModel.tensor_force_quant)
_FLOAT_UNLESS_F16 = (".patch_embd.weight", ".patch_merger.weight")


def quantize_mmproj(src: Path, dst: Path) -> Path:
    """Write a Q8_0 copy of the F16 or BF16 mmproj ``src`` to ``dst`` (atomically) and return ``dst``.

    Metadata is copied unchanged but for ``general.file_type`` (Q8_0). Raises :class:`ToolError` when
    ``src`` is not an mmproj or is already quantized.
    """
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, Keys, LlamaFileType
    from gguf.quants import QuantError, dequantize, quantize

    info = read_gguf_info(src)  # a readable GGUF, or an error naming it
    if not info.is_mmproj:
        raise ToolError(f"{src}: not a vision encoder (mmproj) GGUF")
    reader = GGUFReader(src)
    floats = {GGMLQuantizationType.F16, GGMLQuantizationType.BF16}
    kinds = {t.tensor_type for t in reader.tensors if len(t.shape) > 1} - {GGMLQuantizationType.F32}
    if not kinds or not kinds <= floats:
        have = ", ".join(sorted(k.name for k in kinds)) or "F32 only"
        raise ToolError(
            f"{src}: only an F16 or BF16 mmproj can be quantized to Q8_0 (its weights are {have})"
        )
    f16_source = kinds == {GGMLQuantizationType.F16}

    arch = reader.fields[Keys.General.ARCHITECTURE].contents()
    tmp = dst.with_name(f".{dst.name}.part")
    dst.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(tmp, arch=arch, endianess=reader.endianess)
    try:
        for field in reader.fields.values():
            if field.name == Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
                continue  # written by GGUFWriter itself
            if field.name == Keys.General.FILE_TYPE:
                writer.add_file_type(LlamaFileType.MOSTLY_Q8_0)
                continue
            value_type = field.types[0]
            sub_type = field.types[-1] if value_type == GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)
        n_q8 = 0
        for t in reader.tensors:
            qtype = t.tensor_type
            data = t.data
            if qtype in floats:
                values = np.asarray(dequantize(data, qtype), dtype=np.float32)
                if any(k in t.name for k in _FLOAT_UNLESS_F16):
                    qtype, data = GGMLQuantizationType.F32, values
                else:
                    try:
                        qtype, data = GGMLQuantizationType.Q8_0, quantize(values, GGMLQuantizationType.Q8_0)
                        n_q8 += 1
                    except QuantError:  # rows not whole blocks: the converter's fallback
                        qtype, data = GGMLQuantizationType.F16, quantize(values, GGMLQuantizationType.F16)
            writer.add_tensor(t.name, data, raw_dtype=qtype)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        read_gguf_info(tmp)  # what it wrote must pass docvec's own checks
        os.replace(tmp, dst)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    log.info("%s: %d tensors quantized to Q8_0%s", dst, n_q8, " (F16 source)" if f16_source else "")
    return dst
