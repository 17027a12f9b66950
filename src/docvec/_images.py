"""Image loading, the source-size rule, and the reference's resize, so that mtmd receives exactly the
pixels PyTorch would see."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image, UnidentifiedImageError

from ._errors import InputError
from ._profiles import ImageBounds

__all__ = [
    "MAX_SOURCE_PIXELS",
    "ImageInput",
    "load_image",
    "prepare_image",
    "smart_resize",
    "source_too_large",
    "to_rgb",
]

ImageInput = Image.Image | str | Path

#: The largest source image docvec decodes (128 Mpx, ~400 MB as RGB), wherever it is decoded: the
#: embedder (``docvec embed``, the library) and the render workers (ingest, uploads) apply this one rule
#: to the size an image's header declares, before decoding. It sits below Pillow's own decompression-bomb
#: limit (2 x ``Image.MAX_IMAGE_PIXELS``, 179 Mpx by default), so Pillow's guard stays on as a backstop and
#: this rule answers first.
MAX_SOURCE_PIXELS = 2**27


def source_too_large(width: int, height: int) -> str | None:
    """Why an image of ``width`` x ``height`` is refused before decoding, or ``None`` when it is not."""
    if width * height > MAX_SOURCE_PIXELS:
        return f"image is {width}x{height}: too large to decode (over {MAX_SOURCE_PIXELS} pixels)"
    return None


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
                if reason := source_too_large(opened.width, opened.height):
                    raise InputError(reason, item=name)
                opened.load()
                img = opened.copy()
        except UnidentifiedImageError:
            raise InputError("not an image file Pillow can read", item=name) from None
        except Image.DecompressionBombError as e:
            # Pillow's own limit, lowered by the application below docvec's: the same refusal.
            raise InputError(f"image is too large to decode ({e})", item=name) from None
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
