"""Image loading, the source-size rule, and the reference's resize, so that mtmd receives exactly the
pixels PyTorch would see."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image, UnidentifiedImageError

from ._config import DECODE_BUDGET_MB
from ._errors import InputError
from ._profiles import ImageBounds

__all__ = [
    "ImageInput",
    "bomb_reason",
    "decode_cost",
    "decode_refusal",
    "load_image",
    "prepare_image",
    "smart_resize",
    "to_rgb",
]

ImageInput = Image.Image | str | Path

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


def smart_resize(height: int, width: int, bounds: ImageBounds) -> tuple[int, int]:
    """The (height, width) Qwen2-VL's image processor resizes to: multiples of ``bounds.unit`` within the
    area bounds.

    Same arithmetic as transformers' ``smart_resize`` (Python ``round``: halves go to even), which mtmd's
    resize does not reproduce.
    """
    unit = bounds.unit
    if height <= 0 or width <= 0:
        raise InputError(f"image has no pixels ({width}x{height})")
    aspect = max(height, width) / min(height, width)
    if aspect > bounds.max_aspect:
        raise InputError(f"aspect ratio {aspect:.0f}:1 is over {bounds.max_aspect:.0f}:1 ({width}x{height})")
    h = round(height / unit) * unit
    w = round(width / unit) * unit
    if h * w > bounds.max_pixels:
        beta = math.sqrt(height * width / bounds.max_pixels)
        h = max(unit, math.floor(height / beta / unit) * unit)
        w = max(unit, math.floor(width / beta / unit) * unit)
    elif h * w < bounds.min_pixels:
        beta = math.sqrt(bounds.min_pixels / (height * width))
        h = math.ceil(height * beta / unit) * unit
        w = math.ceil(width * beta / unit) * unit
    return h, w


def load_image(image: ImageInput, *, budget: int = DECODE_BUDGET_MB << 20) -> Image.Image:
    """Open ``image`` (a path or a PIL image) fully, as RGB; errors name the file and the reason. A file
    whose decoding would take more than ``budget`` bytes is refused before it is decoded."""
    if isinstance(image, Image.Image):
        img, name = image, "image"
    elif isinstance(image, str | Path):
        path = Path(image)
        name = str(path)
        if not path.is_file():
            raise InputError("no such file" if not path.exists() else "not a file", item=name)
        try:
            with Image.open(path) as opened:
                if reason := decode_refusal(opened, budget):
                    raise InputError(reason, item=name)
                opened.load()
                img = opened.copy()
        except UnidentifiedImageError:
            raise InputError("not an image file Pillow can read", item=name) from None
        except Image.DecompressionBombError as e:
            raise InputError(bomb_reason(e), item=name) from None
        except (OSError, ValueError, SyntaxError) as e:
            raise InputError(f"cannot decode image: {e}", item=name) from None
    else:
        raise InputError(f"expected a PIL image or a path, got {type(image).__name__}")
    if img.width == 0 or img.height == 0:
        raise InputError(f"image has no pixels ({img.width}x{img.height})", item=name)
    try:
        return to_rgb(img)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot convert image to RGB: {e}", item=name) from None


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


def prepare_image(image: Image.Image, bounds: ImageBounds) -> npt.NDArray[np.uint8]:
    """Resize an RGB image as the reference does (smart_resize, PIL bicubic) and return (h, w, 3) bytes."""
    h, w = smart_resize(image.height, image.width, bounds)
    if (image.width, image.height) != (w, h):
        image = image.resize((w, h), resample=Image.Resampling.BICUBIC)
    return np.asarray(image, dtype=np.uint8)
