"""The one image decoding rule wherever docvec decodes an image (the render workers, the embedder): what
decoding costs, when it is refused, and RGB conversion with transparency onto white."""

from __future__ import annotations

from PIL import Image

__all__ = ["bomb_reason", "decode_cost", "decode_refusal", "to_rgb"]

# Bytes a pixel takes decoded, by Pillow mode.
_MODE_BYTES = {"1": 1, "L": 1, "P": 1, "LA": 2, "La": 2, "PA": 2, "I;16": 2, "I;16B": 2, "I;16L": 2, "RGB": 3}


def decode_cost(image: Image.Image) -> int:
    """About the most memory (bytes) decoding ``image`` and making it RGB takes, from its header alone:
    the decoded pixels, the RGB copy, and for transparency the RGBA copies compositing onto white takes."""
    width, height = image.size
    pixel = _MODE_BYTES.get(image.mode, 4) + 3
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        pixel += 8
    return width * height * pixel


def decode_refusal(image: Image.Image, budget: int) -> str | None:
    """Why ``image`` is refused before decoding (it would take more than ``budget`` bytes), or ``None``.

    The one rule wherever docvec decodes an image: the embedder (``docvec embed``, the library) and the
    render workers (ingest, uploads) alike, with the budget ``DOCVEC_RENDER__MAX_MEMORY_MB`` sets.
    """
    cost = decode_cost(image)
    if cost <= budget:
        return None
    width, height = image.size
    return (
        f"image is {width}x{height} {image.mode}: decoding it takes about {cost >> 20} MB, over the "
        f"{budget >> 20} MB limit (DOCVEC_RENDER__MAX_MEMORY_MB)"
    )


def bomb_reason(error: Image.DecompressionBombError) -> str:
    """The reason an image is refused when Pillow's own guard refuses it while opening (past 2 x
    ``Image.MAX_IMAGE_PIXELS``, 179 Mpx by default, before docvec sees its size): the same words wherever
    it happens."""
    return f"image is too large to decode ({error})"


def to_rgb(img: Image.Image) -> Image.Image:
    """``img`` in RGB; transparency goes onto white."""
    # As in transformers' convert_to_rgb: a transparent page is black text on nothing, and a plain
    # convert("RGB") would make it black on black.
    if img.mode == "RGB":
        return img
    if "A" in img.getbands() or img.info.get("transparency") is not None:
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return img.convert("RGB")
