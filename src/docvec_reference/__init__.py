"""The PyTorch references docvec's numbers are measured against: transformers on a Hugging Face checkpoint,
sharing no code with docvec's own prompts, image preprocessing or pooling, so that comparing the two tests
them. The parity tests (tests/) and the benchmarks (benchmarks/) import them from here.

- :mod:`.jina_v4`: jina-embeddings-v4, single and multi-vector (:class:`~.jina_v4.ReferenceEmbedder`);
- :mod:`.qwen3vl`: Qwen3-VL-Embedding and Qwen3-VL-Reranker (:class:`~.qwen3vl.Qwen3VLReference`,
  :class:`~.qwen3vl.Qwen3VLRerankerReference`);
- :mod:`.colqwen`: colpali-engine's own ColQwen3 (:class:`~.colqwen.ColQwenReference`), the late-interaction
  retrievers' oracle.

A development install (``make setup``: ``pip install -e '.[dev]'``, which puts ``src/`` on the path) has
this package; docvec's wheel leaves it out (pyproject.toml), so users never get test oracles. It needs
the ``tools`` extra (PyTorch, transformers, safetensors); :mod:`.colqwen` colpali-engine too, which
``make setup`` installs.
"""
