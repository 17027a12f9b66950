"""Reading a page's text from its image (OCR), for pages without a usable text layer: scans, photos, image
files. The engine is chosen here and nowhere else: tesseract's command line (Debian's ``tesseract-ocr`` and
its English model ``tesseract-ocr-eng``; Apache-2.0), run as a subprocess.

Chosen by measurement (``benchmarks/bench_ocr.py``, one thread, an AMD EPYC with 2 cores): 14 born-digital
pages of the test corpus rendered in greyscale, as they are and as a cheap scanner would give them (skewed,
blurred, noisy, JPEG), read back and compared with their own text layers. Tesseract at 200 dpi gets a median
0.7% of characters wrong (0.3% of the scans) and finds 94% of the words (92%) in 1.3 s a page, from 22 MB
of Debian packages; rapidocr-onnxruntime 1.4.4 (PP-OCRv4 through onnxruntime) 2.4% (13%) and 87% (56%) in
6 s, from 418 MB of wheels (onnxruntime, OpenCV): it drops the spaces between English words and interleaves
the lines of two columns. At 200 dpi tesseract reads as well as at 300 (6-pt print included) in 0.75x the
time and under half the pixels; at 150 dpi it gets 3.2% wrong.

The engine runs in its own process, started from a render worker: its time is bounded (:data:`TIMEOUT_S`),
it uses one thread (``OMP_THREAD_LIMIT=1``: the embedder wants the cores) and it inherits the worker's
memory limit.
"""

from __future__ import annotations

import io
import math
import os
import re
import shutil
import signal
import subprocess

from PIL import Image

__all__ = ["DPI", "ENGINE", "LANGUAGE", "MAX_PIXELS", "TIMEOUT_S", "OcrError", "available", "read_text"]

#: the engine, as a user would name it
ENGINE = "tesseract"
#: the model tesseract reads with (Debian's tesseract-ocr-eng; Latin script)
LANGUAGE = "eng"
#: the resolution a PDF page is rendered at for OCR (see the measurements above)
DPI = 200
#: the most pixels an image handed to OCR has: an A3 page at 200 dpi (3,308 x 2,339) is 7.7 M; a larger page
#: or scan is scaled down to this (greyscale: 12 MB, and tesseract's working copies a few times that)
MAX_PIXELS = 12_000_000
#: the most one page's OCR may take (a dense A4 page at DPI takes about 2.5 s on one core)
TIMEOUT_S = 120.0
# tesseract's own bounds on a credible resolution; outside them it ignores --dpi and guesses
_DPI_RANGE = (70, 2400)
_INSTALL = "apt-get install tesseract-ocr tesseract-ocr-eng"


class OcrError(Exception):
    """OCR of one image failed: the engine is missing, crashed, timed out or refused; the message says why."""


def available() -> str | None:
    """``None`` when the engine can run here; otherwise one line saying why not and what to install."""
    exe = shutil.which("tesseract")
    if exe is None:
        return f"{ENGINE} is not installed (Debian: {_INSTALL})"
    try:
        done = subprocess.run(
            [exe, "--list-langs"], capture_output=True, text=True, errors="replace", timeout=30, env=_env()
        )
    except subprocess.TimeoutExpired:
        return f"{ENGINE} does not answer (`tesseract --list-langs` took over 30 s)"
    except OSError as e:
        return f"{ENGINE} cannot start ({e.strerror or e}); reinstall it (Debian: {_INSTALL})"
    if done.returncode != 0:
        return f"{ENGINE} does not run ({_exit(done.returncode)}: {_last_line(done.stderr)})"
    # the first line names the folder, one language per line after it
    if LANGUAGE not in done.stdout.splitlines()[1:]:
        return f"{ENGINE} has no English model (Debian: apt-get install tesseract-ocr-{LANGUAGE})"
    return None


def read_text(image: Image.Image, *, dpi: float | None = None) -> str:
    """The text of ``image`` in reading order (tesseract's page layout analysis), lines joined with "\\n" and
    paragraphs with a blank line; "" for an image without text.

    ``dpi`` is the image's resolution where known (a rendered page's), which tesseract uses to judge text
    sizes; without it tesseract estimates. The image is read in greyscale, as given: scale it to at most
    :data:`MAX_PIXELS` first. Raises :class:`OcrError` when the engine fails.
    """
    exe = shutil.which("tesseract")
    if exe is None:
        raise OcrError(f"{ENGINE} is not installed (Debian: {_INSTALL})")
    grey = image if image.mode == "L" else image.convert("L")
    buffer = io.BytesIO()
    grey.save(buffer, "PPM")  # PGM: no encoding work, and tesseract (leptonica) reads it from stdin
    command = [exe, "stdin", "stdout", "-l", LANGUAGE]
    if dpi is not None and math.isfinite(dpi):
        command += ["--dpi", str(round(min(max(dpi, _DPI_RANGE[0]), _DPI_RANGE[1])))]
    try:
        done = subprocess.run(
            command, input=buffer.getvalue(), capture_output=True, timeout=TIMEOUT_S, env=_env()
        )
    except subprocess.TimeoutExpired:
        raise OcrError(f"{ENGINE} took over {TIMEOUT_S:g} s") from None
    except OSError as e:
        raise OcrError(f"{ENGINE} cannot start: {e.strerror or e}") from None
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace")
        raise OcrError(f"{ENGINE} failed ({_exit(done.returncode)}): {_last_line(stderr)}")
    return _tidy(done.stdout.decode("utf-8", "replace"))


def _env() -> dict[str, str]:
    # One thread: tesseract's OpenMP would otherwise take every core the embedder is using.
    return {**os.environ, "OMP_THREAD_LIMIT": "1"}


def _tidy(text: str) -> str:
    # tesseract ends a page with a form feed and separates blocks with blank lines
    lines = [line.rstrip() for line in text.replace("\f", "\n").splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def _exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _last_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
