"""Which model made a vector, by content: a short fingerprint of each of a model's files.

File names say little: two conversions of different weights (another seed, a fine-tune, a re-conversion)
can have the same names. A fingerprint hashes what decides the numbers: the GGUF's whole header (metadata,
and the tensor table: names, shapes, types, offsets) and, of every tensor, three samples of its bytes (its
start, middle and end, :data:`SAMPLE` bytes each). Other weights change every tensor's bytes, so they
change the fingerprint; reading a few KB per tensor keeps it cheap (a 3B model's ~830 tensors: about 10 MB
read, mostly its header's vocabulary), where hashing the whole file would read gigabytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .._errors import ModelFileError
from ._gguf import GGUFInfo

__all__ = ["SAMPLE", "fingerprint"]

#: bytes read at each of a tensor's three sample points
SAMPLE = 4096


def fingerprint(info: GGUFInfo) -> str:
    """16 hex digits that change whenever the file's weights or header do (see the module's docstring)."""
    h = hashlib.blake2b(digest_size=8)
    try:
        with Path(info.path).open("rb") as f:
            h.update(f.read(info.data_start))
            for offset, size in info.tensors:
                start = info.data_start + offset
                for at in sorted({0, max(size // 2 - SAMPLE // 2, 0), max(size - SAMPLE, 0)}):
                    f.seek(start + at)
                    h.update(f.read(min(SAMPLE, size)))
    except OSError as e:
        raise ModelFileError(info.path, f"cannot read: {e.strerror or e}") from None
    return h.hexdigest()
