"""Image loading and the reference's resize, so that mtmd receives exactly the pixels PyTorch would see."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image, UnidentifiedImageError

from .errors import InputError

__all__ = ["ImageInput", "load_image", "prepare_image", "smart_resize"]

ImageInput = Image.Image | str | Path

# Pillow's decompression-bomb guard would turn a large scan into an exception; docvec bounds the work by
# resizing to max_pixels instead, and a genuinely absurd image is still refused here.
_MAX_SOURCE_PIXELS = 40_000 * 40_000


def smart_resize(height: int, width: int, *, unit: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """The (height, width) Qwen2-VL's image processor resizes to: multiples of ``unit`` within the bounds.

    Same arithmetic as transformers' ``smart_resize`` (Python ``round``: halves go to even), which mtmd's
    resize does not reproduce.
    """
    if height <= 0 or width <= 0:
        raise InputError(f"image has no pixels ({width}x{height})")
    if max(height, width) / min(height, width) > 200:
        raise InputError(
            f"aspect ratio {max(height, width) / min(height, width):.0f}:1 is over 200:1 ({width}x{height})"
        )
    h = round(height / unit) * unit
    w = round(width / unit) * unit
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(unit, math.floor(height / beta / unit) * unit)
        w = max(unit, math.floor(width / beta / unit) * unit)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / unit) * unit
        w = math.ceil(width * beta / unit) * unit
    return h, w


def load_image(image: ImageInput) -> Image.Image:
    """Open ``image`` (a path or a PIL image) fully, as RGB; errors name the file and the reason."""
    if isinstance(image, Image.Image):
        img, name = image, "image"
    elif isinstance(image, str | Path):
        path = Path(image)
        name = str(path)
        if not path.is_file():
            raise InputError("no such file" if not path.exists() else "not a file", item=name)
        try:
            with Image.open(path) as opened:
                if opened.width * opened.height > _MAX_SOURCE_PIXELS:
                    raise InputError(
                        f"image is {opened.width}x{opened.height}: too large to decode", item=name
                    )
                opened.load()
                img = opened.copy()
        except UnidentifiedImageError:
            raise InputError("not an image file Pillow can read", item=name) from None
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
            raise InputError(f"cannot decode image: {e}", item=name) from None
    else:
        raise InputError(f"expected a PIL image or a path, got {type(image).__name__}")
    if img.width == 0 or img.height == 0:
        raise InputError(f"image has no pixels ({img.width}x{img.height})", item=name)
    try:
        return _to_rgb(img)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot convert image to RGB: {e}", item=name) from None


def _to_rgb(img: Image.Image) -> Image.Image:
    # Transparency goes onto white, as in transformers' convert_to_rgb: a transparent page is black text
    # on nothing, and a plain convert("RGB") would make it black on black.
    if img.mode == "RGB":
        return img
    if "A" in img.getbands() or img.info.get("transparency") is not None:
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return img.convert("RGB")


def prepare_image(
    image: Image.Image, *, unit: int, min_pixels: int, max_pixels: int
) -> npt.NDArray[np.uint8]:
    """Resize an RGB image as the reference does (smart_resize, PIL bicubic) and return (h, w, 3) bytes."""
    h, w = smart_resize(image.height, image.width, unit=unit, min_pixels=min_pixels, max_pixels=max_pixels)
    if (image.width, image.height) != (w, h):
        image = image.resize((w, h), resample=Image.Resampling.BICUBIC)
    return np.asarray(image, dtype=np.uint8)
