"""docvec's exception tree.

Every error docvec raises on purpose is a :class:`DocvecError`; errors from backends (ctypes return
codes, PIL, the GGUF reader, huggingface_hub, subprocesses) are translated where they enter, so callers
never need to know a backend's exception types::

    DocvecError
    ├── ConfigError            settings that cannot work (bad dim, bad pixel bounds, ...)
    ├── ModelError             a model that cannot be found or loaded
    │   ├── ModelNotFoundError     a path or registry name that points at nothing usable
    │   ├── ModelFileError         a missing, corrupt or wrong-kind GGUF file (names the file)
    │   └── ModelMismatchError     an mmproj that does not belong to the language model
    ├── BackendError           llama.cpp is missing, or one of its calls failed
    ├── ToolError              a conversion, quantization or download step failed
    └── InputError             a text or image that cannot be embedded (names the item)
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "ConfigError",
    "DocvecError",
    "InputError",
    "ModelError",
    "ModelFileError",
    "ModelMismatchError",
    "ModelNotFoundError",
    "ToolError",
]


class DocvecError(Exception):
    """Base class of every error docvec raises on purpose."""


class ConfigError(DocvecError):
    """A setting has a value docvec cannot work with."""


class ModelError(DocvecError):
    """A model cannot be found or loaded."""


class ModelNotFoundError(ModelError):
    """A model path or registry name points at nothing usable."""


class ModelFileError(ModelError):
    """A model file is missing, unreadable, corrupt, or of the wrong kind."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class ModelMismatchError(ModelError):
    """The vision encoder (mmproj) does not belong to the language model."""


class BackendError(DocvecError):
    """llama.cpp is not installed, or one of its calls failed."""


class ToolError(DocvecError):
    """A conversion, quantization or download step failed."""


class InputError(DocvecError):
    """An input cannot be embedded.

    ``index`` is the position of the bad item in the batch it came in (``None`` for a single item),
    ``item`` a short description of it (a path, or the start of a text).
    """

    def __init__(self, reason: str, *, index: int | None = None, item: str | None = None) -> None:
        self.reason = reason
        self.index = index
        self.item = item
        where = []
        if index is not None:
            where.append(f"item {index}")
        if item is not None:
            where.append(item)
        prefix = f"{' '.join(where)}: " if where else ""
        super().__init__(prefix + reason)
