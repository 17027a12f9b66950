"""Rendering: PDFs (pypdfium2) and images (Pillow) become page images, in worker processes, sized to the
model's pixel budget, with each page's text where asked (the text layer, or OCR's: tesseract in a
subprocess, :mod:`._ocr`) (:mod:`._renderer` in this process, :mod:`._worker` in the workers)."""

from . import _renderer
from ._renderer import *  # noqa: F403

__all__ = list(_renderer.__all__)
