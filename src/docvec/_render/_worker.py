"""What runs inside a render worker process: every PDFium and Pillow decode happens here, never in the parent.

PDFium is not thread-safe, not even across documents, so each worker is a process with one thread that
touches PDFium; a second thread only writes finished pages to the parent, so that the renderer can work a
few pages ahead while the parent is busy (embedding, say).

The protocol is a few picklable tuples. Parent to worker: :class:`OpenTask`, :class:`RenderTask`,
:class:`Cancel`, :class:`Stop`. Worker to parent: :class:`Ready` once, then for an open task one
:class:`Info` or :class:`Failed`; for a render task any number of :class:`Page` (each followed by one
``send_bytes`` with the packed RGB pixels) and :class:`PageFailed`, or one :class:`Failed`, and always a
closing :class:`End`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import signal
import threading
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .._decoding import bomb_reason, decode_refusal, to_rgb

# Pages a worker may hold finished but not yet taken by the parent (besides the one being sent).
PREFETCH = 2
# PDFium keeps what it parsed of a document's pages until the document is closed: over a 2,000-page PDF a
# worker grew by hundreds of MB. Reopening the document every so many pages keeps its memory flat.
REOPEN_EVERY = 64
# What a worker takes for itself (Python, Pillow, PDFium, numpy) on top of the decoding budget.
OWN_MEMORY = 256 << 20


class OpenTask(NamedTuple):
    job: int
    path: str
    kind: str


class RenderTask(NamedTuple):
    """Render pages ``start``, ``start + step``, ... (1-based) of one document."""

    job: int
    path: str
    kind: str
    start: int
    step: int
    target_pixels: int
    max_pixels: int


class Cancel(NamedTuple):
    job: int


class Stop(NamedTuple):
    pass


class Ready(NamedTuple):
    pid: int


class Info(NamedTuple):
    job: int
    page_count: int


class Failed(NamedTuple):
    """The whole document failed; ``reason`` is for a user."""

    job: int
    reason: str


class Page(NamedTuple):
    job: int
    number: int
    width: int
    height: int
    size_pt: tuple[float, float] | None
    rotation: int


class PageFailed(NamedTuple):
    job: int
    number: int
    reason: str


class End(NamedTuple):
    job: int


class _DocumentFailure(Exception):
    """Inside the worker: the document cannot be opened (the message is the user-facing reason)."""


class _PageFailure(Exception):
    """Inside the worker: one page cannot be rendered (the message is the user-facing reason)."""


Outgoing = tuple[Any, Any]  # (message, pixel buffer or None)


def page_scale(width_pt: float, height_pt: float, target_pixels: int, max_pixels: int) -> float:
    """Pixels per point that put a page near ``target_pixels`` and surely within ``max_pixels``.

    PDFium's bitmap is ``ceil(w * s) x ceil(h * s)``; the cap solves ``(w*s + 1) * (h*s + 1) <= max_pixels``
    so that rounding up never crosses it, whatever the page size (a 2^31 pt page included).
    """
    if not (math.isfinite(width_pt) and math.isfinite(height_pt)) or width_pt <= 0 or height_pt <= 0:
        raise _PageFailure(f"the page has no visible area ({width_pt:g} x {height_pt:g} pt)")
    area, perimeter = width_pt * height_pt, width_pt + height_pt
    scale = math.sqrt(target_pixels / area)
    cap = (-perimeter + math.sqrt(perimeter * perimeter + 4 * area * (max_pixels - 1))) / (2 * area)
    scale = min(scale, cap)
    # Float rounding can still land one row over the cap; step down until it does not.
    while math.ceil(width_pt * scale) * math.ceil(height_pt * scale) > max_pixels:
        scale *= 0.999
    return scale


def fit_within(width: int, height: int, max_pixels: int) -> tuple[int, int]:
    """The largest size of the same aspect (each side >= 1 px) that has at most ``max_pixels`` pixels."""
    if width * height <= max_pixels:
        return width, height
    s = math.sqrt(max_pixels / (width * height))
    w, h = max(1, math.floor(width * s)), max(1, math.floor(height * s))
    # A 1-px side of an extreme strip cannot shrink further: cut the other side instead.
    h = min(h, max_pixels // w)
    w = min(w, max_pixels // h)
    return w, h


def serve(tasks: Connection, results: Connection, memory_limit: int) -> None:
    """Worker process entry point: answer tasks until :class:`Stop` or until the parent goes away.

    ``memory_limit`` (bytes) is the most an image's decoding may take: larger ones are refused before
    they are decoded, and the OS holds this process to it (plus its own :data:`OWN_MEMORY`), so that
    anything else that grows past it (a decoder, PDFium) fails one page, not the machine.
    """
    _limit_memory(memory_limit + OWN_MEMORY)
    # pypdfium2's advice on XFA forms (rebuild PDFium) is for its own users; pages render without them
    logging.getLogger("pypdfium2").setLevel(logging.ERROR)
    # Ctrl-C at a terminal reaches the whole process group: the parent decides what stops, and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out: queue.Queue[Outgoing | None] = queue.Queue(maxsize=PREFETCH)
    sender = threading.Thread(target=_send_loop, args=(out, results), name="docvec-render-send", daemon=True)
    sender.start()
    out.put((Ready(os.getpid()), None))
    worker = _Worker(tasks, out, memory_limit)
    worker.run()
    out.put(None)
    sender.join()


def _send_loop(out: queue.Queue[Outgoing | None], results: Connection) -> None:
    while (item := out.get()) is not None:
        message, pixels = item
        try:
            results.send(message)
            if pixels is not None:
                results.send_bytes(pixels)
        except OSError:
            # The parent is gone: nothing will read what this process makes.
            os._exit(0)


def _limit_memory(limit: int) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX: the decode budget still applies
        return
    # RLIMIT_DATA counts the heap and private mappings: decoded images, PDFium's bitmaps
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


class _Worker:
    def __init__(self, tasks: Connection, out: queue.Queue[Outgoing | None], memory_limit: int) -> None:
        self.tasks = tasks
        self.out = out
        self.memory_limit = memory_limit
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            try:
                task = self.tasks.recv()
            except (EOFError, OSError):
                return  # the parent is gone
            if isinstance(task, Stop):
                return
            if isinstance(task, OpenTask):
                self.out.put((self.open(task), None))
            elif isinstance(task, RenderTask):
                self.render(task)
                self.out.put((End(task.job), None))
            # A Cancel for a job that already ended needs nothing.

    def cancelled(self, job: int) -> bool:
        """Whether the parent has given up on ``job`` (checked between pages)."""
        while self.tasks.poll():
            message = self.tasks.recv()
            if isinstance(message, Stop):
                self.stopping = True
                return True
            if isinstance(message, Cancel) and message.job == job:
                return True
        return False

    def open(self, task: OpenTask) -> Info | Failed:
        try:
            if task.kind == "pdf":
                pdf = _open_pdf(task.path)
                try:
                    return Info(task.job, len(pdf))
                finally:
                    pdf.close()
            with _open_image(task.path) as image:
                return Info(task.job, _frame_count(image))
        except _DocumentFailure as e:
            return Failed(task.job, str(e))
        except Exception as e:  # a decoder's surprise fails this document, not the worker
            return Failed(task.job, f"cannot open: {type(e).__name__}: {e}")

    def render(self, task: RenderTask) -> None:
        try:
            if task.kind == "pdf":
                self._render_pdf(task)
            else:
                self._render_image(task)
        except _DocumentFailure as e:
            self.out.put((Failed(task.job, str(e)), None))
        except Exception as e:  # a decoder's surprise fails this document, not the worker
            self.out.put((Failed(task.job, f"cannot render: {type(e).__name__}: {e}"), None))

    def _render_pdf(self, task: RenderTask) -> None:
        pdf = _open_pdf(task.path)
        try:
            for done, number in enumerate(range(task.start, len(pdf) + 1, task.step), start=1):
                if self.cancelled(task.job):
                    return
                try:
                    self.out.put(_render_pdf_page(pdf, number, task))
                except _PageFailure as e:
                    self.out.put((PageFailed(task.job, number, str(e)), None))
                if done % REOPEN_EVERY == 0:
                    pdf.close()
                    pdf = _open_pdf(task.path)
        finally:
            pdf.close()

    def _render_image(self, task: RenderTask) -> None:
        with _open_image(task.path) as image:
            for number in range(task.start, _frame_count(image) + 1, task.step):
                if self.cancelled(task.job):
                    return
                try:
                    rgb = _image_frame(image, number, task.max_pixels, self.memory_limit)
                except _PageFailure as e:
                    self.out.put((PageFailed(task.job, number, str(e)), None))
                    continue
                page = Page(task.job, number, rgb.width, rgb.height, None, 0)
                self.out.put((page, rgb.tobytes()))


def _open_pdf(path: str) -> Any:
    # Only workers load PDFium; the parent imports this module for its message types.
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    # Opened through the raw API because pypdfium2 reports a zero-page document with FPDF_GetLastError(),
    # which a successful load does not reset: in a long-lived worker, an empty PDF opened after a corrupt
    # one would read "Data format error". (pypdfium2 also leaves that zero-page handle open.)
    raw = pdfium_c.FPDF_LoadDocument(os.fsencode(path), None)
    if not raw:
        raise _DocumentFailure(_open_failure_reason(int(pdfium_c.FPDF_GetLastError())))
    if pdfium_c.FPDF_GetPageCount(raw) < 1:
        pdfium_c.FPDF_CloseDocument(raw)
        raise _DocumentFailure("no pages (the PDF's page tree is empty or unreadable)")
    pdf = pdfium.PdfDocument(raw)
    # Forms must be set up before any page is loaded, or filled-in field values are not drawn; if that
    # fails, pages render without their form layer rather than not at all.
    with contextlib.suppress(pdfium.PdfiumError):
        pdf.init_forms()
    return pdf


# PDFium's FPDF_ERR_* codes for a document that does not load.
_LOAD_ERRORS = {
    2: "cannot read the file",
    4: "encrypted: a user password is required",
    5: "encrypted with an unsupported security handler",
}
_PDFIUM_ERRORS = {1: "unknown error", 3: "data format error", 6: "page not found or content error"}


def _open_failure_reason(code: int) -> str:
    if code in _LOAD_ERRORS:
        return _LOAD_ERRORS[code]
    return f"corrupt or not a PDF: {_PDFIUM_ERRORS.get(code, 'error')} (PDFium error {code})"


def _render_pdf_page(pdf: Any, number: int, task: RenderTask) -> Outgoing:
    import pypdfium2 as pdfium

    try:
        page = pdf[number - 1]
    except pdfium.PdfiumError as e:
        raise _PageFailure(f"cannot load the page: {e}") from None
    try:
        # Sizes are after /Rotate, and render() applies /Rotate itself: a /Rotate 90 page comes out landscape.
        width_pt, height_pt = float(page.get_width()), float(page.get_height())
        try:
            rotation = int(page.get_rotation())
        except (pdfium.PdfiumError, KeyError):
            rotation = 0  # an invalid /Rotate: PDFium draws the page unrotated
        scale = page_scale(width_pt, height_pt, task.target_pixels, task.max_pixels)
        try:
            bitmap = page.render(scale=scale, rev_byteorder=True, may_draw_forms=True)
        except ValueError as e:  # pypdfium2's check of an empty visible area
            raise _PageFailure(f"the page has no visible area: {e}") from None
        except MemoryError:
            raise _PageFailure(f"out of memory rendering {width_pt:g} x {height_pt:g} pt") from None
        except pdfium.PdfiumError as e:
            raise _PageFailure(f"cannot render the page: {e}") from None
        pixels = bitmap.buffer  # packed RGB (native bitmap: stride == 3 * width); outlives bitmap.close()
        if bitmap.n_channels != 3 or bitmap.stride != 3 * bitmap.width:
            raise _PageFailure(f"unexpected bitmap layout ({bitmap.mode}, stride {bitmap.stride})")
        message = Page(task.job, number, bitmap.width, bitmap.height, (width_pt, height_pt), rotation)
        bitmap.close()
        return message, pixels
    finally:
        page.close()


def _open_image(path: str) -> Image.Image:
    try:
        return Image.open(path)
    except UnidentifiedImageError:
        raise _DocumentFailure("not an image Pillow can read") from None
    except Image.DecompressionBombError as e:  # Pillow's guard, as when docvec embeds an image file
        raise _DocumentFailure(bomb_reason(e)) from None
    except (OSError, ValueError, SyntaxError) as e:
        raise _DocumentFailure(f"cannot read the image: {e}") from None
    except Exception as e:  # Pillow's plugins raise odd types (struct.error, IndexError) on damaged files
        raise _DocumentFailure(f"cannot read the image: {type(e).__name__}: {e}") from None


def _frame_count(image: Image.Image) -> int:
    # Only TIFF frames are pages; the other frames Pillow knows are animation (GIF, WebP, APNG) or
    # previews (MPO), for which the first frame stands for the document.
    if image.format == "TIFF":
        return int(getattr(image, "n_frames", 1))
    return 1


def _image_frame(image: Image.Image, number: int, max_pixels: int, budget: int) -> Image.Image:
    """Frame ``number`` (1-based) upright, RGB on white, downscaled to at most ``max_pixels``; refused
    before decoding when that would take more than ``budget`` bytes."""
    try:
        if number > 1:
            image.seek(number - 1)
        width, height = image.size
        if width * height > max_pixels and image.format == "JPEG":
            # JPEG can decode at 1/2, 1/4, 1/8 scale: far less work and memory for a large photo or scan.
            image.draft(None, fit_within(width, height, max_pixels))
        if reason := decode_refusal(image, budget):  # the size as it will be decoded (drafted, if JPEG)
            raise _PageFailure(reason)
        image.load()
        frame = ImageOps.exif_transpose(image)
        if frame.mode.startswith("I;16"):
            # 16-bit greyscale scans: convert("RGB") would clip them to white; keep the high byte instead.
            frame = Image.fromarray((np.asarray(frame) >> 8).astype(np.uint8), "L")
        frame = to_rgb(frame)
        size = fit_within(frame.width, frame.height, max_pixels)
        if size != frame.size:
            frame = frame.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
        return frame
    except _PageFailure:
        raise
    except MemoryError:
        raise _PageFailure("out of memory decoding the image") from None
    except (OSError, ValueError, SyntaxError, EOFError) as e:
        raise _PageFailure(f"cannot decode the image: {e}") from None
    except Exception as e:  # Pillow's plugins raise odd types (struct.error, IndexError) on damaged files
        raise _PageFailure(f"cannot decode the image: {type(e).__name__}: {e}") from None


def main(argv: list[str]) -> None:
    """A worker process's entry point, ``TASKS_FD RESULTS_FD MEMORY_LIMIT``: serve the parent's pipes."""
    tasks_fd, results_fd, memory_limit = (int(a) for a in argv)
    serve(Connection(tasks_fd, writable=False), Connection(results_fd, readable=False), memory_limit)
