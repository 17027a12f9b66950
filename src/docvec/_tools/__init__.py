"""Build-time tools, used by the command line and never by the runtime: checkpoint conversion
(:mod:`._convert`, with llama.cpp's own converter from the pinned source, :mod:`._toolchain`), downloads
from the Hugging Face Hub (:mod:`._pull`), and the tiny random-weight test models (:mod:`._tiny`,
:mod:`._tiny_checkpoint`, one architecture each in :mod:`._tiny_qwen25vl` and :mod:`._tiny_qwen3vl`).
They need PyTorch and transformers (the ``tools`` extra) or the network."""
