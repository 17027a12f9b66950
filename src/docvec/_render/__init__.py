"""Rendering: PDFs (pypdfium2) and images (Pillow) become page images, in worker processes, sized to the
model's pixel budget, with each page's text where asked (the text layer, or OCR's: tesseract in a
subprocess, :mod:`._ocr`) (:mod:`._renderer` in this process, :mod:`._worker` in the workers)."""

from ._renderer import (
    READS_JPEG2000,
    DocumentInfo,
    DocumentKind,
    ExtractedText,
    OcrMode,
    PageFailure,
    RenderedPage,
    Renderer,
    TextSource,
    detect_kind,
)

__all__ = [
    "READS_JPEG2000",
    "DocumentInfo",
    "DocumentKind",
    "ExtractedText",
    "OcrMode",
    "PageFailure",
    "RenderedPage",
    "Renderer",
    "TextSource",
    "detect_kind",
]
