"""Image loading and the reference-exact resize."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as hf_smart_resize

from docvec import InputError
from docvec._model._images import load_image, prepare_image, smart_resize
from docvec._model._profiles import JINA_V4, ImageBounds

from .documents import make_tiff

BOUNDS = ImageBounds(3136, 602112, 28, 200)


def test_the_profile_holds_jina_v4s_bounds() -> None:
    assert (JINA_V4.min_pixels, JINA_V4.max_pixels, JINA_V4.image_unit, JINA_V4.max_aspect) == (
        3136,
        602112,
        28,
        200,
    )


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((350, 238), (224, 336)),
        ((60, 50), (56, 56)),
        ((595, 842), (840, 588)),
        ((20, 10), (56, 84)),
        ((28, 28), (56, 56)),
    ],
)
def test_smart_resize_known_sizes(size: tuple[int, int], expected: tuple[int, int]) -> None:
    w, h = size
    assert smart_resize(h, w, BOUNDS) == expected


def test_smart_resize_equals_transformers_everywhere() -> None:
    sides = [
        1,
        13,
        14,
        27,
        28,
        42,
        50,
        60,
        99,
        238,
        350,
        378,
        406,
        595,
        842,
        1000,
        1240,
        1754,
        2480,
        3508,
        5000,
    ]
    for h, w in itertools.product(sides, sides):
        if max(h, w) / min(h, w) > 200:
            continue
        for lo, hi in ((3136, 602112), (784, 100352), (200704, 1003520)):
            ours = smart_resize(h, w, ImageBounds(lo, hi, 28, 200))
            assert ours == hf_smart_resize(h, w, factor=28, min_pixels=lo, max_pixels=hi), (h, w, lo, hi)
            assert ours[0] % 28 == 0 and ours[1] % 28 == 0


def test_smart_resize_refuses_extreme_aspect() -> None:
    with pytest.raises(InputError, match="aspect ratio"):
        smart_resize(10, 3000, BOUNDS)


def test_prepare_image_is_pil_bicubic() -> None:
    img = Image.effect_mandelbrot((350, 238), (-2, -1, 1, 1), 50).convert("RGB")
    out = prepare_image(img, BOUNDS)
    assert out.shape == (224, 336, 3) and out.dtype == np.uint8
    assert np.array_equal(out, np.asarray(img.resize((336, 224), Image.Resampling.BICUBIC)))


def test_prepare_image_keeps_an_image_already_at_size() -> None:
    img = Image.effect_mandelbrot((336, 224), (-2, -1, 1, 1), 50).convert("RGB")
    assert np.array_equal(prepare_image(img, BOUNDS), np.asarray(img))


def test_transparency_goes_onto_white() -> None:
    img = Image.new("RGBA", (40, 40), (0, 0, 0, 0))
    img.putpixel((0, 0), (0, 0, 0, 255))
    rgb = np.asarray(load_image(img))
    assert rgb[0, 0].tolist() == [0, 0, 0]
    assert rgb[20, 20].tolist() == [255, 255, 255]


def test_palette_and_grey_images_become_rgb(tmp_path: Path) -> None:
    for mode in ("L", "P", "1", "CMYK", "I;16"):
        p = tmp_path / f"img-{mode.replace(';', '')}.tiff"
        Image.new(mode, (30, 20)).save(p)
        assert load_image(p).mode == "RGB"


def test_load_image_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.png"
    with pytest.raises(InputError, match=r"missing\.png: no such file"):
        load_image(missing)
    not_image = tmp_path / "notes.png"
    not_image.write_text("this is text, not a PNG")
    with pytest.raises(InputError, match=r"notes\.png: not an image file"):
        load_image(not_image)
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"empty\.jpg"):
        load_image(empty)
    truncated = tmp_path / "cut.png"
    Image.effect_mandelbrot((300, 300), (-2, -1, 1, 1), 50).save(truncated)
    truncated.write_bytes(truncated.read_bytes()[:400])
    with pytest.raises(InputError, match=r"cut\.png: cannot decode image"):
        load_image(truncated)
    with pytest.raises(InputError, match="not a file"):
        load_image(tmp_path)


def test_zero_size_image_is_refused() -> None:
    with pytest.raises(InputError, match="no pixels"):
        load_image(Image.new("RGB", (0, 10)))


def test_real_world_images_load(documents: Path, tmp_path: Path) -> None:
    for name in ("pysamples__image.jpg", "pysamples__smile.png"):
        assert load_image(documents / name).mode == "RGB"
    assert load_image(make_tiff(tmp_path / "scan.tiff", [(30, 40), (40, 30)])).size == (30, 40)
    with pytest.raises(InputError, match="not an image file"):
        load_image(documents / "pysamples__minimal-document.pdf")
