"""Images as the model sees them: loading (under the one decoding limit, :mod:`docvec._decoding`) and the
reference's resize, so that mtmd receives exactly the pixels PyTorch would see."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image, UnidentifiedImageError

from .._config import DECODE_BUDGET_MB
from .._decoding import bomb_reason, decode_refusal, to_rgb
from .._errors import InputError
from ._profiles import ImageBounds

__all__ = ["ImageInput", "load_image", "prepare_image", "prepare_images", "smart_resize"]

ImageInput = Image.Image | str | Path


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


def prepare_image(image: Image.Image, bounds: ImageBounds) -> npt.NDArray[np.uint8]:
    """Resize an RGB image as the reference does (smart_resize, PIL bicubic) and return (h, w, 3) bytes."""
    h, w = smart_resize(image.height, image.width, bounds)
    if (image.width, image.height) != (w, h):
        image = image.resize((w, h), resample=Image.Resampling.BICUBIC)
    return np.asarray(image, dtype=np.uint8)


def prepare_images(
    images: Sequence[ImageInput], bounds: ImageBounds, *, budget: int = DECODE_BUDGET_MB << 20
) -> list[npt.NDArray[np.uint8]]:
    """Every one of ``images`` loaded (under ``budget``, as :func:`load_image`) and resized for the model,
    before any model work: a bad one is an :class:`InputError` naming its index and file. Only the resized
    bytes are kept (at most ``bounds.max_pixels`` x 3 each), not the decoded originals."""
    if isinstance(images, str | bytes | Path):
        raise InputError(f"images must be a list, not a single {type(images).__name__}")
    prepared = []
    for i, image in enumerate(images):
        try:
            prepared.append(prepare_image(load_image(image, budget=budget), bounds))
        except InputError as e:
            raise InputError(e.reason, index=i, item=e.item or _describe(image)) from None
    return prepared


def _describe(image: object) -> str:
    return str(image) if isinstance(image, str | Path) else type(image).__name__
