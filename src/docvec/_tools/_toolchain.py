"""Where docvec's managed llama.cpp lives: the pinned llama-cpp-python source and the tools inside it.

``llama.cpp/build.sh`` downloads the pinned source release into the cache folder, builds the wheel from
it and installs that. The Python bindings come from the installed wheel; the conversion tools and the real
Qwen2 vocabulary, which the wheel does not ship, are read from the unpacked source.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._errors import ToolError

__all__ = ["LLAMA_CPP_PYTHON_VERSION", "LlamaCppSource"]

#: Must match llama.cpp/pin.env (a test keeps the two equal).
LLAMA_CPP_PYTHON_VERSION = "0.3.36"


@dataclass(frozen=True)
class LlamaCppSource:
    """The unpacked llama-cpp-python source release under the cache folder."""

    root: Path

    @classmethod
    def in_cache(cls, cache_dir: Path) -> LlamaCppSource:
        """The source that ``llama.cpp/build.sh`` unpacked under ``cache_dir``."""
        v = LLAMA_CPP_PYTHON_VERSION
        return cls(cache_dir / "llama-cpp-python" / v / "src" / f"llama_cpp_python-{v}")

    @property
    def vendor(self) -> Path:
        return self.root / "vendor" / "llama.cpp"

    @property
    def converter(self) -> Path:
        """``convert_hf_to_gguf.py``, the tool users run on real checkpoints."""
        return self._existing(self.vendor / "convert_hf_to_gguf.py")

    @property
    def qwen2_vocab(self) -> Path:
        """The real Qwen2 vocabulary and merges, as llama.cpp ships them for its tokenizer tests."""
        return self._existing(self.vendor / "models" / "ggml-vocab-qwen2.gguf")

    def _existing(self, path: Path) -> Path:
        if not path.is_file():
            raise ToolError(
                f"{path} is missing: the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} source is not unpacked "
                f"under {self.root.parents[1]}. Run `make setup` (llama.cpp/build.sh) first."
            )
        return path
