"""A language model's token embedding table, read from its GGUF: text tokens as the input embeddings that
llama.cpp's token path computes from them, so that the text around an image decodes in one batch with the
image's embeddings.

A batch holds either tokens or embeddings; decoded apart, the few tokens of text before and after a page's
image each read every weight of the model once more (:meth:`docvec._model._session.Session.decode`, and
where a page's time goes in llama.cpp/README.md). llama.cpp has no call that returns a token's embedding row,
so the rows are read here from the file's ``token_embd.weight`` (memory-mapped, as llama.cpp maps it)
and widened to F32 by gguf-py's ``dequantize``, which computes them as ggml's ``get_rows`` does for the
types taken here (F32, F16, BF16, Q8_0); for other types :meth:`TokenTable.open` gives ``None`` and text
decodes as tokens.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ._gguf import GGUFInfo

__all__ = ["TokenTable"]


class TokenTable:
    """The rows of ``token_embd.weight`` as F32, widened with zeros to the model's input width (where an
    image token carries more features after its embedding, deepstack's, llama.cpp pads a text token's
    with zeros the same way)."""

    def __init__(self, data: npt.NDArray[np.uint8], ggml_type: int, n_embd: int, n_embd_inp: int) -> None:
        self._data = data  # (n_vocab, bytes per row)
        self._type = ggml_type
        self.n_embd = n_embd
        self.n_embd_inp = n_embd_inp

    @classmethod
    def open(cls, info: GGUFInfo, n_embd_inp: int) -> TokenTable | None:
        """The table of the language model ``info`` describes, or ``None`` where it has none or stores it in
        a type read exactly only by llama.cpp."""
        entry = info.layout.get("token_embd.weight")
        if entry is None:
            return None
        from gguf.constants import GGMLQuantizationType as T

        ggml_type, shape, i = entry
        if ggml_type not in (T.F32, T.F16, T.BF16, T.Q8_0) or len(shape) != 2:
            return None
        n_embd, n_vocab = shape
        offset, size = info.tensors[i]
        if size % n_vocab or n_embd > n_embd_inp:
            return None
        data = np.memmap(info.path, dtype=np.uint8, mode="r", offset=info.data_start + offset, shape=(size,))
        return cls(data.reshape(n_vocab, size // n_vocab), ggml_type, n_embd, n_embd_inp)

    def rows(self, ids: npt.NDArray[np.int32]) -> npt.NDArray[np.float32]:
        """The input embeddings of token ``ids``: (len(ids), n_embd_inp) F32."""
        from gguf.constants import GGMLQuantizationType
        from gguf.quants import dequantize

        # gguf-py's conversions are ggml's: F16 and BF16 widened, Q8_0 each int8 times its block's scale
        x = dequantize(np.ascontiguousarray(self._data[ids]), GGMLQuantizationType(self._type))
        out = np.zeros((len(ids), self.n_embd_inp), np.float32)
        out[:, : self.n_embd] = x.reshape(len(ids), self.n_embd)
        return out
