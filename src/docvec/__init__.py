"""docvec: visual document retrieval with jina-embeddings-v4 through llama.cpp."""

from .config import EmbedSettings, Settings
from .embed import Embedder
from .errors import (
    BackendError,
    ConfigError,
    DocvecError,
    InputError,
    ModelError,
    ModelFileError,
    ModelMismatchError,
    ModelNotFoundError,
    ToolError,
)
from .modelfiles import ModelFiles

__all__ = [
    "BackendError",
    "ConfigError",
    "DocvecError",
    "EmbedSettings",
    "Embedder",
    "InputError",
    "ModelError",
    "ModelFileError",
    "ModelFiles",
    "ModelMismatchError",
    "ModelNotFoundError",
    "Settings",
    "ToolError",
]

__version__ = "0.1.0"
