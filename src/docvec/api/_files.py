"""How a stored document's file is served: by the type its bytes have, never by the name a client gave
it (a PNG uploaded as ``x.html`` is served as ``image/png``, named ``x.html.png``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from .._errors import RenderError
from .._render._renderer import detect_kind

__all__ = ["ServedType", "file_type"]

#: types a browser shows in its own viewer, which runs no script of the file's
_INLINE = frozenset({"application/pdf", "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"})
_BYTES = "application/octet-stream"


@dataclass(frozen=True)
class ServedType:
    """What a file is served as: its media type, the extension that type takes, and whether a browser
    may show it (else it is an attachment)."""

    media_type: str
    extension: str
    inline: bool

    def name_for(self, name: str) -> str:
        """``name`` with this type's extension (added when it has another one: ``x.html`` ->
        ``x.html.png``), so that a saved copy opens as what it is."""
        if not self.extension or Path(name).suffix.lower() in _SUFFIXES.get(self.extension, {self.extension}):
            return name
        return f"{name}{self.extension}"


#: the suffixes a name may already have for a type's extension
_SUFFIXES = {".jpg": {".jpg", ".jpeg"}, ".tif": {".tif", ".tiff"}, ".jp2": {".jp2", ".j2k", ".jpx", ".jpf"}}
_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/bmp": ".bmp",
    "image/tiff": ".tif",
    "image/jp2": ".jp2",
}


def file_type(path: Path) -> ServedType:
    """The type ``path``'s bytes have: a PDF (``%PDF-`` where PDFium looks for it), or an image by the
    format Pillow reads in its header; anything else, or a file that cannot be read, is bytes."""
    try:
        kind = detect_kind(path)
    except RenderError:
        kind = None
    if kind == "pdf":
        return ServedType("application/pdf", ".pdf", inline=True)
    if kind == "image":
        try:
            with Image.open(path) as image:  # the header only: nothing is decoded
                media = Image.MIME.get(image.format or "", _BYTES)
        except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError):
            media = _BYTES
        if media in _EXTENSIONS:
            return ServedType(media, _EXTENSIONS[media], inline=media in _INLINE)
    return ServedType(_BYTES, "", inline=False)
