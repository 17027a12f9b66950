"""The render stage: documents (PDFs and images) to page images near the embedder's pixel budget.

PDFium is not thread-safe, not even across documents (threads crash the process), so every PDFium call
runs in worker *processes* of docvec's own (see :class:`_Process`); each worker
opens the document itself and sends pages back as packed RGB bytes (PNG-encoding them would cost more
than the copy it saves). Pages stream in order, a few ahead of the consumer, so that rendering overlaps
with whatever the consumer does (embedding) and a 1000-page PDF never sits in memory whole.

A PDF page is rendered at ``sqrt(target_pixels / page area)`` pixels per point, never over
``max_pixels``; the target is the embedder's page budget (an A4 page at a budget of 602,112 pixels:
653 x 923 px). An image document is decoded upright (EXIF orientation), in RGB on white, downscaled to at
most ``max_pixels``. Whole-document failures raise :class:`RenderError`; a single bad page is a
:class:`PageFailure` and the other pages go on.

With ``text``, each page comes with its text, read in the worker that renders it: the PDF's text layer in
pdfium's reading order, or, where that is missing or broken (garbage glyph codes) and OCR is on,
OCR's (:mod:`docvec._render._ocr`, from the page rendered again at the OCR resolution). :meth:`Renderer.texts`
reads the text alone, for documents whose page images exist already.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing.spawn
import os
import pickle
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Literal

from PIL import Image, features

from .._closing import Closing
from .._config import DECODE_BUDGET_MB, RENDER_TIMEOUT_S, TEXT_MAX_CHARS
from .._errors import ConfigError, InputError, RenderError, RendererStartError, RendererStateError
from .._records import TextFrom
from . import _ocr
from . import _worker as w

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

log = logging.getLogger("docvec")

# A fresh worker imports docvec, Pillow and pypdfium2; a loaded machine can take a while. Not charged to
# any document's time limit.
_START_TIMEOUT_S = 60.0
# A pipe that cannot be read whole any more: the worker died (EOF, a broken pipe), or a read was cut in
# the middle of a message (Ctrl-C lands during recv), after which the next length read is garbage
# (OverflowError, MemoryError) or the next message does not unpickle. Either way the worker is replaced.
_UNREADABLE = (EOFError, OSError, OverflowError, MemoryError, ValueError, pickle.UnpicklingError)
# After a document is abandoned (error, early close), how long an idle-bound worker may take to finish
# the page it is on before it is killed instead.
_SETTLE_TIMEOUT_S = 5.0

DocumentKind = Literal["pdf", "image"]
#: when pages are read by OCR: never, only pages without a usable text layer (and image files), every page
OcrMode = Literal["off", "auto", "on"]
#: where a page's text came from (the records' one definition)
TextSource = TextFrom
_OCR_MODES = ("off", "auto", "on")


@dataclass(frozen=True)
class RenderedPage:
    """One rendered page: ``number`` is 1-based, ``image`` is RGB.

    ``size_pt`` is the page's visible size in points after its /Rotate (``None`` for image files);
    ``rotation`` is the page's /Rotate in degrees, already applied to ``image``. ``text`` is the page's text
    when the renderer reads it (``text=True``), ``text_from`` where it came from; both are ``None`` when no
    text was asked for or none was found (an empty page, a scan with OCR off), and ``text_from`` is
    ``"unread"`` for a page OCR would read while OCR is missing.
    """

    number: int
    image: Image.Image
    size_pt: tuple[float, float] | None
    rotation: int
    text: str | None = None
    text_from: TextSource | None = None


@dataclass(frozen=True)
class ExtractedText:
    """One page's text, from :meth:`Renderer.texts`: as :attr:`RenderedPage.text` and ``text_from``."""

    number: int
    text: str | None
    text_from: TextSource | None


@dataclass(frozen=True)
class PageFailure:
    """A page that could not be loaded or rendered (the document's other pages go on)."""

    number: int
    reason: str


@dataclass(frozen=True)
class DocumentInfo:
    """What :meth:`Renderer.open` learns about a document: its kind and page count."""

    path: Path
    kind: DocumentKind
    page_count: int


def detect_kind(path: Path) -> DocumentKind | None:
    """Whether ``path`` holds a PDF or an image, by content (never by extension); ``None`` for neither.

    A PDF has ``%PDF-`` within its first 1024 bytes (some carry junk before it); images are PNG, JPEG,
    TIFF (either byte order, BigTIFF too), WebP, BMP, GIF, and JPEG 2000 where Pillow reads it. An
    unreadable file raises :class:`RenderError`.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except FileNotFoundError:
        raise RenderError(path, "no such file") from None
    except IsADirectoryError:
        raise RenderError(path, "not a file") from None
    except OSError as e:
        raise RenderError(path, f"cannot read the file: {e.strerror or e}") from None
    if _is_image(head):
        return "image"
    if b"%PDF-" in head:
        return "pdf"
    return None


#: JPEG 2000, read where Pillow has OpenJPEG: the JP2 box signature, and a bare codestream
_JPEG2000 = (b"\x00\x00\x00\x0cjP  \r\n\x87\n", b"\xff\x4f\xff\x51")
READS_JPEG2000 = features.check("jpg_2000")


def _is_image(head: bytes) -> bool:
    if head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")):
        return True
    if READS_JPEG2000 and head.startswith(_JPEG2000):
        return True
    if head.startswith((b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")):  # TIFF, BigTIFF
        return True
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return True
    # "BM" alone is too weak (any text may start so): also require a known DIB header size.
    return head[:2] == b"BM" and int.from_bytes(head[14:18], "little") in (12, 40, 52, 56, 64, 108, 124)


class _WorkerGone(Exception):
    """A worker process died or its pipe broke."""


class _TimedOut(Exception):
    pass


class _Process:
    """A render worker's process: a Python running :func:`docvec._render._worker.main` on the two pipe ends
    it serves.

    Not multiprocessing's spawn: that re-runs the parent's main module in the child, so a user's script
    without an ``if __name__ == "__main__":`` guard would run again in every worker. This child imports
    docvec and nothing of its parent's."""

    def __init__(self, tasks_fd: int, results_fd: int, memory_limit: int) -> None:
        env = dict(os.environ)
        # the docvec this process imported, wherever it came from (an installed package, a source tree)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_DOCVEC_ROOT, env.get("PYTHONPATH")]))
        self._popen = subprocess.Popen(
            [_python(), "-c", _ENTRY, str(tasks_fd), str(results_fd), str(memory_limit)],
            pass_fds=(tasks_fd, results_fd),
            stdin=subprocess.DEVNULL,
            env=env,
        )
        self.pid = self._popen.pid

    @property
    def exitcode(self) -> int | None:
        """As multiprocessing has it: ``None`` while it runs, ``-N`` when signal N ended it."""
        return self._popen.poll()

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    def join(self, timeout: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._popen.kill()


def _python() -> str:
    # multiprocessing's choice of interpreter: the venv's python, also where sys.executable is an embedder
    return os.fsdecode(multiprocessing.spawn.get_executable() or sys.executable)


# -c, not -m: run as __main__, the worker module would be a second copy of the one its package imports
_ENTRY = f"import sys; from {w.__name__} import main; main(sys.argv[1:])"
_DOCVEC_ROOT = str(Path(__file__).resolve().parents[2])


class _Worker:
    """The parent's handle on one worker process: a task pipe in, a result pipe out."""

    def __init__(self, memory_limit: int) -> None:
        tasks_in, tasks_out = os.pipe()
        results_in, results_out = os.pipe()
        self.tasks = Connection(tasks_out, readable=False)
        self.results = Connection(results_in, writable=False)
        if sys.platform == "linux":
            import fcntl

            # A 1 MiB pipe moves a page in fewer round trips (~1.5x faster) than the 64 KiB default.
            with contextlib.suppress(OSError):
                fcntl.fcntl(self.results.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
        try:
            self.process = _Process(tasks_in, results_out, memory_limit)
        except BaseException:
            self.tasks.close()
            self.results.close()
            raise
        finally:
            # Close our copies of the child's ends, so that a dead child reads as EOF, not as silence.
            os.close(tasks_in)
            os.close(results_out)
        self.ready = False  # until its Ready message is read

    @property
    def pid(self) -> int:
        return self.process.pid or 0

    def send(self, message: object) -> None:
        try:
            self.tasks.send(message)
        except OSError:
            raise _WorkerGone from None

    def receive(self, timeout: float | None) -> Any:
        """The next message; raises _TimedOut after ``timeout`` seconds, _WorkerGone if the worker died."""
        # a dead worker's pipe reads as EOF (the child held its only write end)
        if not wait([self.results], timeout):
            raise _TimedOut
        try:
            return self.results.recv()
        except _UNREADABLE:
            raise _WorkerGone from None

    def receive_bytes(self) -> bytes:
        try:
            return self.results.recv_bytes()
        except _UNREADABLE:
            raise _WorkerGone from None

    def exit_description(self) -> str:
        self.process.join(1.0)
        code = self.process.exitcode
        if code is not None and code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5.0)
        self.tasks.close()
        self.results.close()


class _Clock:
    """A document's time budget, charged only while the parent waits on its workers.

    Time the consumer spends between pages (embedding one, say) is not rendering time and is not charged,
    nor is OCR's (:meth:`credit`): a scanned book takes seconds a page, and each page's OCR has its own limit.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.spent_s = 0.0

    def credit(self, seconds: float) -> None:
        """Give back ``seconds`` a worker spent on OCR."""
        self.spent_s = max(self.spent_s - seconds, 0.0)

    def receive(self, worker: _Worker) -> Any:
        start = time.monotonic()
        try:
            return worker.receive(max(self.limit_s - self.spent_s, 0.0))
        finally:
            self.spent_s += time.monotonic() - start


def _stop_pool(pool: list[_Worker | None]) -> None:
    for worker in pool:
        if worker is not None:
            with contextlib.suppress(_WorkerGone):
                worker.send(w.Stop())
    for i, worker in enumerate(pool):
        if worker is not None:
            worker.process.join(2.0)
            worker.kill()
            pool[i] = None


class Renderer(Closing):
    """Renders documents to page images in worker processes; a context manager (or call :meth:`close`).

    ``workers`` processes share a document's pages (each opens the document itself), pages are still
    yielded in order. ``target_pixels`` is the pixel budget a PDF page is rendered near; ``max_pixels``
    (default 4 x target) is a hard cap on any page or image; ``timeout_s`` limits the time spent rendering
    one document (waiting for its pages; the consumer's time between pages is not counted, nor is OCR's);
    ``memory_limit`` (bytes) is the most decoding one image may take, held by each worker (see
    :func:`docvec._render._worker.serve`). A timed-out or crashed worker is replaced, and the renderer goes
    on with the next document.

    ``text`` reads each page's text as well (:attr:`RenderedPage.text`; without it, nothing is extracted
    and nothing costs more); ``ocr`` says which pages OCR reads: ``"off"``, ``"auto"`` (pages without a
    usable text layer, and image files) or ``"on"`` (every page: OCR's text replaces the layer's, which is
    kept where OCR reads nothing); ``text_limit`` is the most characters kept of a page (longer text is cut
    at a whitespace near it). Where the OCR engine is missing, OCR is off and one warning says what to
    install (:attr:`ocr_missing`).

    One document at a time: a renderer is not for use from several threads. Workers are processes of
    docvec's own (they never run the caller's script again), started on first use; when they cannot
    start, :class:`RendererStartError` says why (an error of the run, not of a document).
    """

    def __init__(
        self,
        *,
        workers: int = 1,
        target_pixels: int,
        max_pixels: int | None = None,
        timeout_s: float = RENDER_TIMEOUT_S,
        memory_limit: int = DECODE_BUDGET_MB << 20,
        text: bool = False,
        ocr: OcrMode = "off",
        text_limit: int = TEXT_MAX_CHARS,
    ) -> None:
        if workers < 1:
            raise ConfigError(f"workers must be at least 1, got {workers}")
        if target_pixels < 1:
            raise ConfigError(f"target_pixels must be positive, got {target_pixels}")
        max_pixels = 4 * target_pixels if max_pixels is None else max_pixels
        if max_pixels < target_pixels:
            raise ConfigError(f"max_pixels ({max_pixels}) is below target_pixels ({target_pixels})")
        if not timeout_s > 0:
            raise ConfigError(f"timeout_s must be positive, got {timeout_s}")
        if ocr not in _OCR_MODES:
            raise ConfigError(f"ocr must be one of {', '.join(_OCR_MODES)}, got {ocr!r}")
        if text_limit < 1:
            raise ConfigError(f"text_limit must be positive, got {text_limit}")
        self.workers = workers
        self.target_pixels = target_pixels
        self.max_pixels = max_pixels
        self.timeout_s = timeout_s
        self.memory_limit = memory_limit
        self.text = text
        self.ocr: OcrMode = ocr
        self.text_limit = text_limit
        self._ocr_checked = False
        self._ocr_missing: str | None = None
        self._pool: list[_Worker | None] = [None] * workers
        self._job = 0
        self._busy = False
        self._closed = False
        # Workers of a renderer dropped without close() still stop when it is collected.
        self._finalizer = weakref.finalize(self, _stop_pool, self._pool)

    def close(self) -> None:
        """Stop the worker processes. Idempotent."""
        self._closed = True
        self._finalizer()

    @property
    def ocr_missing(self) -> str | None:
        """Why OCR is off although asked for (the engine is missing: what to install), or ``None``.

        Checked once, on first need; the warning it logs then is the renderer's only one about it.
        """
        if not self._ocr_checked and self.ocr != "off":
            self._ocr_missing = _ocr.available()
            if self._ocr_missing is not None:
                log.warning("OCR is off: %s", self._ocr_missing)
        self._ocr_checked = True
        return self._ocr_missing

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (started on first use)."""
        return [wk.pid for wk in self._pool if wk is not None and wk.process.is_alive()]

    def open(self, path: Path, kind: DocumentKind | None = None) -> DocumentInfo:
        """Check that ``path`` is a document PDFium or Pillow can open, and count its pages.

        ``kind`` is the file's kind when the caller already knows it (:func:`detect_kind`); otherwise it
        is detected here. Raises :class:`RenderError` (encrypted, no pages, corrupt, not a document,
        timed out, ...).
        """
        path = Path(path)
        kind = kind or self._kind(path)
        self._enter()
        try:
            worker = self._workers(path)[0]
            job = self._next_job()
            clock = _Clock(self.timeout_s)
            try:
                worker.send(w.OpenTask(job, str(path), kind))
                reply = clock.receive(worker)
            except _TimedOut:
                log.warning("%s: timed out after %g s; render worker replaced", path, self.timeout_s)
                self._replace(0)
                raise RenderError(path, f"timed out after {self.timeout_s:g} s") from None
            except _WorkerGone:
                raise RenderError(path, self._crashed(0)) from None
            if isinstance(reply, w.Failed):
                raise RenderError(path, reply.reason)
            return DocumentInfo(path, kind, reply.page_count)
        finally:
            self._busy = False

    def pages(
        self, document: Path | DocumentInfo, *, first: int = 1
    ) -> Generator[RenderedPage | PageFailure, None, None]:
        """Stream the pages of ``document`` (a path, or what :meth:`open` said of it, which spares a second
        look at the file's kind) from page ``first`` (1-based) on, in order.

        Each page is a :class:`RenderedPage`, or a :class:`PageFailure` when that page cannot be loaded or
        rendered. Workers render a few pages ahead while the caller consumes. A whole-document failure
        (including the time limit and a crashed worker) raises :class:`RenderError` from the iterator.
        """
        for page in self._document(document, first, image=True):
            assert not isinstance(page, ExtractedText)
            yield page

    def texts(
        self, document: Path | DocumentInfo, *, first: int = 1
    ) -> Generator[ExtractedText | PageFailure, None, None]:
        """Stream the text of each page of ``document`` from page ``first`` on, in order, without rendering
        the pages for the model: what :meth:`pages` gives as :attr:`RenderedPage.text` with ``text=True``
        (the same rules: the text layer, broken layers treated as missing, OCR as :attr:`ocr` says), for a
        document whose page images exist already.

        A page that cannot be loaded is a :class:`PageFailure`; whole-document failures raise
        :class:`RenderError`, as with :meth:`pages`.
        """
        for page in self._document(document, first, image=False):
            assert not isinstance(page, RenderedPage)
            yield page

    def _document(
        self, document: Path | DocumentInfo, first: int, *, image: bool
    ) -> Iterator[RenderedPage | ExtractedText | PageFailure]:
        """:meth:`pages` (``image``) or :meth:`texts`: the document's stream, the renderer busy meanwhile."""
        if first < 1:
            raise InputError(f"first is a 1-based page number, got {first}")
        if isinstance(document, DocumentInfo):
            path, kind = document.path, document.kind
        else:
            path = Path(document)
            kind = self._kind(path)
        self._enter()
        try:
            yield from self._stream(path, kind, first, image=image)
        finally:
            self._busy = False

    def _text_spec(self, image: bool) -> w.TextSpec | None:
        """What text the workers read: none for rendering without ``text``; OCR off where it is missing."""
        if image and not self.text:
            return None
        if self.ocr_missing:
            # the pages OCR would read are marked unread, for a later run to read them
            return w.TextSpec("off", self.text_limit, unavailable=True)
        return w.TextSpec(self.ocr, self.text_limit)

    def _text(self, path: Path, number: int, result: w.TextResult, clock: _Clock) -> ExtractedText:
        clock.credit(result.ocr_s)
        if result.problem is not None:
            log.warning("%s: page %d: %s", path, number, result.problem)
        if result.source == "unread":
            return ExtractedText(number, None, "unread")
        source: TextSource | None = None
        if result.text is not None and result.source in ("pdf", "ocr"):
            source = "pdf" if result.source == "pdf" else "ocr"
        return ExtractedText(number, result.text if source else None, source)

    def _stream(
        self, path: Path, kind: DocumentKind, first: int, *, image: bool
    ) -> Iterator[RenderedPage | ExtractedText | PageFailure]:
        spec = self._text_spec(image)
        pool = self._workers(path)
        job = self._next_job()
        clock = _Clock(self.timeout_s)
        # Worker i renders pages first + i, first + i + n, ...: each worker's stream is in page order, so
        # reading the workers round-robin yields the document in order with no reordering buffer.
        running: set[int] = set()
        current = 0  # the worker last spoken to: the one to blame if a pipe breaks
        try:
            for current, worker in enumerate(pool):
                task = w.RenderTask(
                    job,
                    str(path),
                    kind,
                    first + current,
                    len(pool),
                    self.target_pixels,
                    self.max_pixels,
                    spec,
                    image,
                )
                worker.send(task)
                running.add(current)
            number = first
            while True:
                current = (number - first) % len(pool)
                message = clock.receive(pool[current])
                if isinstance(message, w.End):
                    running.discard(current)
                    return
                if isinstance(message, w.Failed):
                    raise RenderError(path, message.reason)
                if message.number != number:
                    raise _WorkerGone  # out of step: treat as broken rather than mislabel pages
                if isinstance(message, w.PageFailed):
                    log.warning("%s: page %d: %s", path, number, message.reason)
                    yield PageFailure(number, message.reason)
                elif isinstance(message, w.Text):
                    yield self._text(path, number, message.result, clock)
                else:
                    pixels = pool[current].receive_bytes()
                    picture = Image.frombytes("RGB", (message.width, message.height), pixels)
                    del pixels
                    text = None if message.text is None else self._text(path, number, message.text, clock)
                    yield RenderedPage(
                        number,
                        picture,
                        message.size_pt,
                        message.rotation,
                        None if text is None else text.text,
                        None if text is None else text.text_from,
                    )
                number += 1
        except _TimedOut:
            # Every worker of this document is busy with it: replace them all.
            for i in running:
                self._replace(i)
            running.clear()
            log.warning("%s: timed out after %g s; render workers replaced", path, self.timeout_s)
            raise RenderError(path, f"timed out after {self.timeout_s:g} s") from None
        except _WorkerGone:
            running.discard(current)
            raise RenderError(path, self._crashed(current)) from None
        finally:
            self._settle(pool, job, running)

    def _settle(self, pool: list[_Worker], job: int, running: set[int]) -> None:
        """Bring workers still on ``job`` back to idle (cancel, drop what they send), or replace them."""
        for i in running:
            with contextlib.suppress(_WorkerGone):
                pool[i].send(w.Cancel(job))
        for i in running:
            deadline = time.monotonic() + _SETTLE_TIMEOUT_S
            try:
                while True:
                    message = pool[i].receive(max(deadline - time.monotonic(), 0.0))
                    if isinstance(message, w.Page):
                        pool[i].receive_bytes()
                    elif isinstance(message, w.End) and message.job == job:
                        break
            except (_TimedOut, _WorkerGone):
                log.debug("render worker %d did not settle; replacing it", pool[i].pid)
                self._replace(i)

    def _kind(self, path: Path) -> DocumentKind:
        kind = detect_kind(path)
        if kind is None:
            raise RenderError(path, "not a document (neither a PDF nor an image)")
        return kind

    def _enter(self) -> None:
        if self._closed:
            raise RendererStateError("this Renderer is closed")
        if self._busy:
            raise RendererStateError(
                "this Renderer is already rendering: finish or close that iterator first"
            )
        self._busy = True

    def _next_job(self) -> int:
        self._job += 1
        return self._job

    def _workers(self, path: Path) -> list[_Worker]:
        """The pool, with missing or dead workers (re)started, all ready."""
        for i, worker in enumerate(self._pool):
            if worker is None or not worker.process.is_alive():
                if worker is not None:
                    worker.kill()
                try:
                    self._pool[i] = _Worker(self.memory_limit)
                except OSError as e:  # out of processes, memory or file descriptors
                    self._pool[i] = None
                    raise RendererStartError(f"the render worker could not start ({e})") from None
        pool = [wk for wk in self._pool if wk is not None]
        for worker in pool:
            if worker.ready:
                continue
            try:
                worker.receive(_START_TIMEOUT_S)
            except (_TimedOut, _WorkerGone) as e:
                reason = "did not start in time" if isinstance(e, _TimedOut) else worker.exit_description()
                # Every worker not yet ready goes: one left alive would still have its Ready message unread.
                for i, other in enumerate(self._pool):
                    if other is not None and not other.ready:
                        other.kill()
                        self._pool[i] = None
                raise RendererStartError(
                    f"the render worker could not start ({reason}); its error output is above"
                ) from None
            worker.ready = True
            log.debug("render worker %d ready", worker.pid)
        return pool

    def _replace(self, i: int) -> None:
        """Kill worker ``i`` and start its successor now, so that it is ready by the next document."""
        worker = self._pool[i]
        if worker is not None:
            worker.kill()
        self._pool[i] = None
        if not self._closed:
            try:
                self._pool[i] = _Worker(self.memory_limit)
            except OSError as e:
                log.warning("cannot start a render worker now (%s); retrying with the next document", e)

    def _crashed(self, i: int) -> str:
        """Why worker ``i`` failed (its exit status); it is replaced."""
        worker = self._pool[i]
        if worker is None:
            return "the render worker stopped"
        worker.process.join(1.0)  # a broken pipe can come a moment before the exit status
        if worker.process.exitcode is None:
            reason = "the render worker stopped answering"
        else:
            reason = f"the render worker crashed ({worker.exit_description()})"
        log.warning("render worker %d: %s; replacing it", worker.pid, reason)
        self._replace(i)
        return reason
