"""Reranking speed and parity: docvec's Reranker (llama.cpp) against the PyTorch reference, side by side.

    python benchmarks/bench_rerank.py               # random weights, Qwen3-VL-Reranker-2B's geometry (built
                                                    # once, tempered, converted, cached): ~1 h on 2 cores
    python benchmarks/bench_rerank.py --quick       # the same model, one budget (256), searches of 2 and 4
    python benchmarks/bench_rerank.py --tiny --quick            # the tiny test geometry: a smoke test
    python benchmarks/bench_rerank.py --budgets 512,1024 --searches 5,10 --skip-torch

On the same (query, page image) pairs and thread count (2 by default), in one run:

1. parity at --parity-budget (1,024 image tokens by default): docvec's scores (the GGUFs as converted, BF16
   where the CPU has bf16 arithmetic, else F16) against torch float32 on 2 queries x --pages pages, flash
   attention on and off: max |score diff|, the same ranking and yes/no answers, max |margin diff| (the
   margin is the score's logit, (head[yes] - head[no]) . h); torch bf16 (the official code's dtype) beside
   them for scale;
2. seconds per candidate page at each --budgets (image tokens; max_pixels = tokens x 32 x 32): llama.cpp
   with flash attention on and off (one score() call per query, its time split into vision, language model
   and the query prefix, decoded once per call) against torch bf16, one forward per pair as the official
   code runs them, with the ratio; 2 queries at the parity budget, --timing-queries (1) at the others;
3. seconds per search of N candidates (--searches) at the profile's page budget: llama.cpp with the query
   prefix reused (decoded once, the KV cache cut back to it before each page) and without (the whole
   conversation decoded for every page), with the flash attention setting found faster in 2.; one search of
   the largest N each way, timed when its N-th candidate is scored (--separate-searches: one per N); torch
   bf16 measured at --torch-searches (5), computed as N x its per-page time there for the other N (marked);
4. a summary: which flash-attention setting is faster here and whether it keeps the 1e-3 score bar.

docvec and torch bf16 run in two worker processes loaded side by side, their work alternating query by
query (only one computes at a time), so that load from other processes slows both alike; torch fp32, the
parity reference (~13 GB at 2B), runs alone afterwards: two 2B models are never held by torch at once.
Pages are real ones (--corpus, the shared corpus's PDFs rendered with pypdfium2 at the budget's area) when
the corpus is there, else generated page-like images. The weights are random ("no" head row tempered toward
"yes", docvec._tools._tiny.temper_answers, so scores are not saturated): the scores mean nothing, the
arithmetic and the timings do. A 1,024-token page costs ~30-55 s on 2 cores, so the default run (about 70
such page forwards, 40 of them the two searches of 20) takes about an hour; --searches 5,10 or --quick cut
it. This machine is shared and noisy: compare the ratios of one run, not absolute numbers across runs;
each engine's CPU use and the load average are printed to show when other processes competed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the cache folder (under <cache>/models) of each geometry's checkpoint and GGUFs
MODELS = {False: "bench-qwen3vl-reranker-2b", True: "bench-qwen3vl-reranker-tiny"}
QUERIES = ["table of PDF syntax features by version", "two-column article about page layout"]
SEARCH_QUERY = "total amount due on the invoice"
#: the shared corpus's pages the candidates are drawn from, in order (file, 0-based page): text in columns,
#: an A3 table, a 16:9 slide, book pages, a form, an image page
CORPUS_PAGES = [
    ("pysamples__multicolumn.pdf", 0),
    ("safedocs__CompactedPDFSyntaxMatrix.pdf", 0),
    ("pdfium__bug_781804.pdf", 0),
    ("pysamples__GeoTopo-komprimiert.pdf", 12),
    ("pysamples__pdflatex-4-pages.pdf", 0),
    ("pysamples__google-doc-document.pdf", 0),
    ("pysamples__GeoTopo-komprimiert.pdf", 40),
    ("pysamples__pdflatex-forms.pdf", 0),
    ("pysamples__crazyones-pdfa.pdf", 0),
    ("pysamples__cmyk-image.pdf", 0),
]
UNIT = 32  # pixels per side of one image token (patch 16 x spatial merge 2)
BAR = 1e-3  # docvec's score parity bar


# -- pages ---------------------------------------------------------------------------------------------


def _generated(i: int, pixels: int) -> Any:
    """A page-like image of about ``pixels`` pixels: A4 portrait, with every third one a 16:9 slide."""
    from PIL import Image, ImageDraw

    aspect = 16 / 9 if i % 3 == 2 else 1 / math.sqrt(2)  # width / height
    h = int(math.sqrt(pixels / aspect))
    w = int(h * aspect)
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    for y in range(20, h - 30, 14):
        d.text((20, y), f"Line {y // 14}: lorem ipsum dolor sit amet {(y + i) * 7919 % 997}", fill="black")
    d.rectangle((w // 2, h // 2, w - 30, h - 30), fill=(40 + 30 * i % 200, 90, 200))
    return img


def _render_pages(corpus: Path, budgets: list[int], n: int, out: Path) -> tuple[str, dict[int, list[str]]]:
    """``n`` candidate pages for each budget, as PNG files under ``out``, each rendered (or drawn) at the
    budget's area so that both engines resize it by as little as the rule needs: (where from, paths)."""
    sources: list[tuple[Path, int]] = [
        (corpus / f, p)
        for f, p in CORPUS_PAGES
        if (corpus / "MANIFEST.tsv").is_file() and (corpus / f).is_file()
    ]
    pages: dict[int, list[str]] = {}
    if len(sources) >= 3:
        import pypdfium2 as pdfium

        where = f"{len(sources)} real pages of {corpus} (pypdfium2), cycled"
        for b in budgets:
            pages[b] = []
            for i in range(n):
                path, index = sources[i % len(sources)]
                dst = out / f"{b}-{i:02d}.png"
                if i >= len(sources):  # a candidate seen again: the same file, computed again
                    shutil.copy(out / f"{b}-{i % len(sources):02d}.png", dst)
                else:
                    pdf = pdfium.PdfDocument(path)
                    try:
                        page = pdf[min(index, len(pdf) - 1)]
                        w, h = page.get_size()
                        bitmap = page.render(scale=math.sqrt(b * UNIT * UNIT / (w * h)))
                        bitmap.to_pil().convert("RGB").save(dst)
                    finally:
                        pdf.close()
                pages[b].append(str(dst))
    else:
        where = f"generated page-like images ({corpus} not found)"
        for b in budgets:
            pages[b] = []
            for i in range(n):
                dst = out / f"{b}-{i:02d}.png"
                _generated(i, b * UNIT * UNIT).save(dst)
                pages[b].append(str(dst))
    return where, pages


# -- the engines, each in a worker process driven by the parent ----------------------------------------------


def _worker(spec: dict[str, Any]) -> None:
    """Serve one engine: a JSON command a line on stdin, a JSON reply a line on stdout, with the command's
    wall and CPU seconds. Native libraries' prints to stdout are sent to stderr (the replies' channel stays
    clean)."""
    import resource

    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    engine: _DocvecEngine | _TorchEngine = (_DocvecEngine if spec["engine"] == "docvec" else _TorchEngine)(
        spec
    )
    proto.write(json.dumps({"result": None, "wall": 0.0, "cpu": 0.0, "rss_mb": 0.0}) + "\n")
    proto.flush()
    for line in sys.stdin:
        cmd = json.loads(line)
        ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        result = getattr(engine, cmd.pop("op"))(**cmd)
        wall, ru = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
        cpu = ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime
        proto.write(json.dumps({"result": result, "wall": wall, "cpu": cpu, "rss_mb": ru.ru_maxrss / 1024}))
        proto.write("\n")
        proto.flush()


class _DocvecEngine:
    """docvec's Reranker at one budget at a time, flash attention on and off (two contexts on one mapped
    model)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from docvec import ModelFiles

        self.files = ModelFiles(Path(spec["lm"]), Path(spec["mmproj"]))
        self.threads = spec["threads"]
        self.rrs: dict[str, Any] = {}

    def open(self, budget: int) -> None:
        from PIL import Image

        from docvec import EmbedSettings, Reranker

        self.close()
        for fa in ("on", "off"):
            s = EmbedSettings(threads=self.threads, flash_attention=fa == "on")
            rr = Reranker(self.files, s, max_pixels=budget * UNIT * UNIT)
            rr.score(
                "warm up", [Image.new("RGB", (256, 256), "white")]
            )  # first-call costs out of the timings
            self.rrs[fa] = rr

    def close(self) -> None:
        for rr in self.rrs.values():
            rr.close()
        self.rrs = {}

    def pairs(self, fa: str, query: str, pages: list[str]) -> dict[str, Any]:
        """One score() call: its wall time and last_timing, and the scores."""
        rr = self.rrs[fa]
        t = time.perf_counter()
        scores = rr.score(query, pages)
        wall = time.perf_counter() - t
        lt = rr.last_timing
        return {
            "wall": wall,
            "prefix": lt.prefix,
            "vision": lt.vision,
            "language": lt.language,
            "pages": lt.pages,
            "tokens": lt.tokens,
            "scores": scores.tolist(),
        }

    def search(self, fa: str, query: str, pages: list[str], ns: list[int], reuse: bool) -> dict[str, Any]:
        """One search of ``max(ns)`` candidates, and the time at which its n-th candidate was scored for
        each n: a search of n candidates is that same work, up to the decoding and resizing of the
        candidates after the n-th, which score() does before any model work (printed beside)."""
        rr = self.rrs[fa]
        marks: list[float] = []
        decode = rr._decode_last

        def hook(chunks: Any, pos0: int) -> Any:
            h = decode(chunks, pos0)
            marks.append(time.perf_counter())
            return h

        rr._decode_last, rr.reuse_prefix = hook, reuse
        try:
            t = time.perf_counter()
            res = self.pairs(fa, query, pages[: max(ns)])
        finally:
            del rr._decode_last
            rr.reuse_prefix = True
        res["at"] = {str(n): marks[n - 1] - t for n in ns}
        return res


class _TorchEngine:
    """The PyTorch reference (src/docvec_reference/qwen3vl.py) in one dtype, as the official code runs it: one
    forward per (query, page) pair."""

    def __init__(self, spec: dict[str, Any]) -> None:
        import torch
        from PIL import Image

        from docvec_reference.qwen3vl import Qwen3VLRerankerReference

        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[spec["dtype"]]
        self.ref = Qwen3VLRerankerReference(Path(spec["hf"]), dtype=dtype, threads=spec["threads"])
        self.diff = self.ref.diff_vector.astype("float64")
        self.ref.last_state("warm up", Image.new("RGB", (256, 256), "white"))

    def budget(self, budget: int) -> None:
        self.ref.max_pixels = budget * UNIT * UNIT  # the resize's bound, as docvec's max_pixels

    def pairs(self, query: str, pages: list[str]) -> dict[str, Any]:
        """Each page's forward time, margin (h . (head[yes] - head[no]), float64), score and tokens."""
        from PIL import Image

        out: dict[str, list[Any]] = {"walls": [], "margins": [], "scores": [], "tokens": []}
        for path in pages:
            img = Image.open(path).convert("RGB")
            t = time.perf_counter()
            h, _, _ = self.ref.last_state(query, img)
            out["walls"].append(time.perf_counter() - t)
            m = float(h.astype("float64") @ self.diff)
            out["margins"].append(m)
            out["scores"].append(1 / (1 + math.exp(-m)))
            out["tokens"].append(self.ref.image_tokens(img))
        return out

    def search(self, query: str, pages: list[str]) -> float:
        """Seconds of the reference's score() over the candidates (the official loop)."""
        from PIL import Image

        imgs = [Image.open(p).convert("RGB") for p in pages]
        t = time.perf_counter()
        self.ref.score(query, imgs)
        return time.perf_counter() - t


class _Worker:
    """The parent's handle on a worker process: its commands' wall and CPU seconds, the load average
    around them, its peak RSS."""

    def __init__(self, name: str, spec: dict[str, Any]) -> None:
        self.name = name
        self.threads = spec["threads"]
        self.busy = self.cpu = self.rss_mb = 0.0
        self.last_cpu_use = 0.0  # of the last command
        self.loads: list[float] = []
        self.error: str | None = None
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            # transformers' loading bars would bury the progress lines
            env={**os.environ, "OMP_NUM_THREADS": str(self.threads), "HF_HUB_DISABLE_PROGRESS_BARS": "1"},
        )  # stderr passes through: progress lines, and the traceback of a failure
        t = time.perf_counter()
        with contextlib.suppress(_WorkerDied):  # a worker that died loading fails its first command
            self._reply()  # loaded
        self.load_s = time.perf_counter() - t

    def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.error = f"exit {self.proc.wait()} (its traceback is above)"
            raise _WorkerDied(self.error)
        return dict(json.loads(line))

    def __call__(self, op: str, **kw: Any) -> Any:
        if self.error:
            raise _WorkerDied(self.error)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.proc.stdin.flush()
        load = os.getloadavg()[0]
        r = self._reply()
        if op in ("open", "budget"):  # loading and warming up, not measured work
            self.load_s += r["wall"]
            return r["result"]
        self.loads += [load, os.getloadavg()[0]]
        self.last_cpu_use = r["cpu"] / (r["wall"] * self.threads) if r["wall"] else 0.0
        self.busy += r["wall"]
        self.cpu += r["cpu"]
        self.rss_mb = max(self.rss_mb, r["rss_mb"])
        return r["result"]

    def close(self) -> dict[str, Any]:
        """Stop the worker; what the report prints about it."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()
        if self.error:
            return {"error": self.error}
        return {
            "busy_s": self.busy,
            "load_s": self.load_s,
            "cpu_use": self.cpu / (self.busy * self.threads) if self.busy else 0.0,
            "load": (min(self.loads), statistics.fmean(self.loads), max(self.loads))
            if self.loads
            else (0, 0, 0),
            "peak_rss_mb": self.rss_mb,
        }


class _WorkerDied(Exception):
    pass


def _say(msg: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- the parent: build, run every engine, print the tables -------------------------------------------------


def _models(tiny: bool, cache: Path) -> tuple[Path, Path, Path]:
    """(hf folder, language-model GGUF, mmproj GGUF) of the random-weight reranker, built once, cached."""
    from docvec._tools._convert import convert_checkpoint, default_outtype
    from docvec._tools._tiny import temper_answers
    from docvec._tools._tiny_checkpoint import build_checkpoint
    from docvec._tools._tiny_qwen3vl import Qwen3VLGeometry
    from docvec._tools._toolchain import LlamaCppSource

    src = LlamaCppSource.in_cache(cache)
    base = cache / "models" / MODELS[tiny]
    hf = base / "hf"
    built = base / "built.stamp"  # written last: an interrupted build is redone, not half-used
    if not built.is_file():
        shutil.rmtree(base, ignore_errors=True)
        print(f"building the {'tiny' if tiny else '2B-geometry'} reranker checkpoint in {hf} (once) ...")
        geometry = Qwen3VLGeometry.tiny() if tiny else Qwen3VLGeometry.qwen3vl_2b()
        build_checkpoint(hf, src.qwen2_vocab, geometry, dtype="bfloat16", cache_dir=cache / "tokenizers")
        temper_answers(hf)  # scores spread out around 0.25 instead of saturated near 0
        built.write_text("ok")
    t = default_outtype()
    d = base / t
    stamp = d / "converted.json"
    if not stamp.is_file():
        print(f"converting to {t.upper()} reranker GGUFs (once) ...", flush=True)
        files = convert_checkpoint(hf, d, source=src, name="m", outtype=t, reranker=True).main
        stamp.write_text(json.dumps({"lm": str(files.language_model), "mmproj": str(files.mmproj)}))
    paths = json.loads(stamp.read_text())
    return hf, Path(paths["lm"]), Path(paths["mmproj"])


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _cpu() -> str:
    """The CPU's model name from /proc/cpuinfo, with its family/model numbers and the vector extensions
    the two engines' kernels use (a virtual machine's model name can be as short as "AMD EPYC")."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    for line in info.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = fields.get("flags", fields.get("Features", "")).split()
    ext = [
        f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "bf16", "sve") if f in flags
    ]
    ids = ", ".join(
        f"{k} {fields[k]}" for k in ("vendor_id", "cpu family", "model", "stepping", "cpu MHz") if k in fields
    )
    vm = ", a virtual machine" if "hypervisor" in flags else ""
    return f"{fields.get('model name', platform.machine())} ({ids}{vm}); {' '.join(ext) or 'no AVX2'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--budgets", type=_ints, default=[256, 512, 1024], help="image tokens a page (256,512,1024)"
    )
    ap.add_argument("--searches", type=_ints, default=[5, 10, 20], help="candidates a search (5,10,20)")
    ap.add_argument(
        "--torch-searches",
        type=_ints,
        default=[5],
        help="N at which torch's search is measured (5); others computed",
    )
    ap.add_argument(
        "--parity-budget", type=int, help="image tokens of the parity pairs (the profile's: 1024)"
    )
    ap.add_argument("--pages", type=int, default=3, help="pages a query in the parity and per-page pairs (3)")
    ap.add_argument(
        "--timing-queries",
        type=int,
        default=1,
        help="queries of the per-page pairs at the budgets other than the parity one (1; the parity one: 2)",
    )
    ap.add_argument(
        "--search-fa",
        choices=["faster", "default", "on", "off"],
        default="faster",
        help="llama.cpp's flash attention in the searches: the faster in 2. (default), the profile's, on/off",
    )
    ap.add_argument(
        "--separate-searches",
        action="store_true",
        help="one llama.cpp search per N (default: one search of the largest N, timed at each N)",
    )
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1), help="both engines (2)")
    ap.add_argument("--skip-torch", action="store_true", help="llama.cpp only: no parity, no torch columns")
    ap.add_argument("--skip-fp32", action="store_true", help="no torch float32 (no parity; ~13 GB at 2B)")
    ap.add_argument("--quick", action="store_true", help="budget 256 (parity too), searches of 2 and 4")
    ap.add_argument("--tiny", action="store_true", help="the tiny test geometry instead of the 2B one")
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus", help="real PDFs")
    ap.add_argument("--json", type=Path, help="also write every engine's raw measurements to this file")
    ap.add_argument(
        "--from-json", type=Path, help="print the tables of an earlier run's --json file; run nothing"
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(json.loads(args.worker))
        return
    if args.from_json:
        _reprint(args.from_json)
        return
    started = time.perf_counter()
    from docvec import Settings
    from docvec._model._profiles import QWEN3_VL_RERANKER

    default_budget = QWEN3_VL_RERANKER.page_pixels // UNIT**2
    if args.quick:
        args.budgets, args.searches, args.torch_searches = [256], [2, 4], [2]
        args.parity_budget = args.parity_budget or 256
    parity_budget = args.parity_budget or default_budget
    search_budget = default_budget if default_budget in args.budgets or not args.budgets else args.budgets[-1]
    if args.searches and search_budget not in args.budgets:
        args.budgets.append(search_budget)
    budgets = sorted(
        set(args.budgets) | ({parity_budget} if not (args.skip_torch or args.skip_fp32) else set())
    )

    cache = Settings().cache_dir
    hf, lm, mm = _models(args.tiny, cache)
    tmp = Path(tempfile.mkdtemp(prefix="bench-rerank-"))
    try:
        where, pages = _render_pages(args.corpus, budgets, max([args.pages, *args.searches]), tmp)
        geometry = "tiny" if args.tiny else "Qwen3-VL-2B (Qwen3-VL-Reranker-2B's)"
        print(
            f"\nCPU: {_cpu()}\n{os.cpu_count()} logical CPUs here; {args.threads} threads for every engine\n"
            f"model: random weights, {geometry} geometry; GGUFs {lm.name} + {mm.name}\n"
            f"pages: {where}\nload average at start: {os.getloadavg()[0]:.2f}\n",
            flush=True,
        )
        results = _measure(args, (hf, lm, mm), pages, budgets, parity_budget, search_budget)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": {
                        k: v if isinstance(v, int | list | str | None) else str(v)
                        for k, v in vars(args).items()
                    },
                    "run": {
                        "budgets": budgets,
                        "parity_budget": parity_budget,
                        "search_budget": search_budget,
                    },
                    **results,
                },
                indent=1,
            )
        )
    _report(results, args, budgets, parity_budget, search_budget)
    print(f"\nwall time of this run: {(time.perf_counter() - started) / 60:.1f} min")


def _measure(
    args: argparse.Namespace,
    model: tuple[Path, Path, Path],
    pages: dict[int, list[str]],
    budgets: list[int],
    parity_budget: int,
    search_budget: int,
) -> dict[str, dict[str, Any]]:
    """Every measurement: docvec and torch bf16 loaded side by side, their work alternating pair by pair
    (a burst of load from other processes then slows both alike instead of skewing their ratio; one of
    them computes at a time), then torch fp32 alone for the parity."""
    from docvec._model._profiles import QWEN3_VL_RERANKER

    hf, lm, mm = model
    dv_out: dict[str, Any] = {"pairs": {}, "search": {}, "fa_default": QWEN3_VL_RERANKER.flash_attention}
    tb_out: dict[str, Any] = {"pairs": {}, "search": {}}
    print("loading docvec (llama.cpp) and torch bf16 side by side (their work alternates) ...", flush=True)
    dv = _Worker("docvec", {"engine": "docvec", "threads": args.threads, "lm": str(lm), "mmproj": str(mm)})
    tb = None
    if not args.skip_torch:
        tb = _Worker(
            "torch bf16", {"engine": "torch", "dtype": "bf16", "threads": args.threads, "hf": str(hf)}
        )

    def torch(op: str, **kw: Any) -> Any:
        try:
            return tb(op, **kw) if tb is not None else None
        except _WorkerDied:
            return None  # reported with the engines

    results: dict[str, dict[str, Any]] = {}
    try:
        for b in budgets:
            dv("open", budget=b)
            torch("budget", budget=b)
            cands = pages[b]
            runs: dict[str, list[Any]] = {"on": [], "off": []}
            truns = []
            queries = QUERIES if b == parity_budget else QUERIES[: args.timing_queries]
            for qi, q in enumerate(queries):
                for step in ("on", "off", "torch") if qi % 2 == 0 else ("torch", "off", "on"):
                    if step == "torch":
                        r = torch("pairs", query=q, pages=cands[: args.pages])
                        if r is not None:
                            truns.append({**r, "cpu_use": tb.last_cpu_use if tb else 0.0})
                            _say(f"torch bf16, {b} tokens, query {qi + 1}: {sum(r['walls']):.1f} s")
                    else:
                        r = dv("pairs", fa=step, query=q, pages=cands[: args.pages])
                        runs[step].append({**r, "cpu_use": dv.last_cpu_use})
                        _say(f"docvec FA {step}, {b} tokens, query {qi + 1}: {runs[step][-1]['wall']:.1f} s")
            dv_out["pairs"][str(b)] = runs
            if truns:
                tb_out["pairs"][str(b)] = truns
            if b == search_budget and args.searches:
                _search(args, dv, tb, torch, cands, runs, dv_out, tb_out)
    finally:
        results["docvec"] = {**dv_out, **dv.close()}
        if tb is not None:
            results["torch bf16"] = {**tb_out, **tb.close()}
    if not (args.skip_torch or args.skip_fp32):
        print("loading torch fp32 (the parity reference), alone ...", flush=True)
        tf = _Worker(
            "torch fp32", {"engine": "torch", "dtype": "fp32", "threads": args.threads, "hf": str(hf)}
        )
        fruns = []
        try:
            tf("budget", budget=parity_budget)
            for qi, q in enumerate(QUERIES):
                fruns.append(tf("pairs", query=q, pages=pages[parity_budget][: args.pages]))
                _say(f"torch fp32, {parity_budget} tokens, query {qi + 1}: {sum(fruns[-1]['walls']):.1f} s")
        except _WorkerDied:
            pass
        finally:
            results["torch fp32"] = {"pairs": {str(parity_budget): fruns}, **tf.close()}
    return results


def _search(
    args: argparse.Namespace,
    dv: _Worker,
    tb: _Worker | None,
    torch: Any,
    cands: list[str],
    runs: dict[str, list[Any]],
    dv_out: dict[str, Any],
    tb_out: dict[str, Any],
) -> None:
    """The searches at the profile's budget: llama.cpp with the prefix reused, torch's measured ones, then
    llama.cpp without reuse."""
    fa = args.search_fa
    if fa == "default":
        fa = "on" if dv_out["fa_default"] else "off"
    elif fa == "faster":  # by the language model's time: the part the setting changes
        per = {k: sum(r["language"] for r in v) / sum(r["pages"] for r in v) for k, v in runs.items()}
        fa = min(per, key=per.__getitem__)
    dv_out["search_fa"] = fa
    ns = args.searches
    for step in ("reuse", "torch", "no_reuse"):
        if step == "torch":
            for n in (n for n in args.torch_searches if n in ns):
                w = torch("search", query=SEARCH_QUERY, pages=cands[:n])
                if w is not None and tb is not None:
                    tb_out["search"][str(n)] = w
                    tb_out.setdefault("search_cpu_use", {})[str(n)] = tb.last_cpu_use
                    _say(f"torch bf16 search of {n}: {w:.1f} s")
            continue
        for group in [[n] for n in ns] if args.separate_searches else [ns]:
            r = dv("search", fa=fa, query=SEARCH_QUERY, pages=cands, ns=group, reuse=step == "reuse")
            r["cpu_use"] = dv.last_cpu_use
            for n in group:
                dv_out["search"].setdefault(str(n), {})[step] = {
                    **r,
                    "wall": r["at"][str(n)],
                    "total": r["wall"],
                }
            _say(f"docvec FA {fa} search of {max(group)}, reuse_prefix={step == 'reuse'}: {r['wall']:.1f} s")


def _reprint(path: Path) -> None:
    """The tables of a --json file (its header lines, CPU and pages, are not in it)."""
    import ast

    data = json.loads(path.read_text())
    raw = data.pop("args")
    run = data.pop("run", None)
    typed = {
        k: ast.literal_eval(v) if isinstance(v, str) and v[:1] in "[0123456789TFN" else v
        for k, v in raw.items()
    }
    args = argparse.Namespace(**typed)
    if run is None:  # a file from before "run" was written
        budgets = sorted(int(b) for b in data["docvec"]["pairs"])
        fp32 = data.get("torch fp32", {}).get("pairs", {})
        run = {
            "budgets": budgets,
            "parity_budget": int(next(iter(fp32))) if fp32 else args.parity_budget or 1024,
            "search_budget": 1024 if 1024 in budgets else budgets[-1],
        }
    print(f"(the tables of {path})")
    _report(data, args, run["budgets"], run["parity_budget"], run["search_budget"])


# -- the tables ------------------------------------------------------------------------------------------


def _cpu_use(runs: list[dict[str, Any]]) -> float | None:
    """The mean CPU use of measured calls (None for a run that did not record it)."""
    uses = [r["cpu_use"] for r in runs if "cpu_use" in r]
    return statistics.fmean(uses) if uses else None


def _logit(p: float) -> float:
    return math.log(p / (1 - p)) if 0 < p < 1 else math.copysign(math.inf, p - 0.5)


def _report(
    results: dict[str, dict[str, Any]],
    args: argparse.Namespace,
    budgets: list[int],
    parity_budget: int,
    search_budget: int,
) -> None:
    print(
        "\nengines (busy: seconds in measured work; CPU use: CPU seconds / (busy x threads), under 100% when"
        "\nother processes took the cores; load average: 1 min, min/mean/max around the engine's work, which"
        "\nitself adds about its thread count):"
    )
    for name, r in results.items():
        if "error" in r:
            print(f"  {name:<11} failed: {r['error']}")
        else:
            lo, mean, hi = r["load"]
            print(
                f"  {name:<11} busy {r['busy_s'] / 60:5.1f} min (+{r['load_s']:.0f} s loading), CPU use "
                f"{r['cpu_use']:4.0%}, load {lo:.1f}/{mean:.1f}/{hi:.1f}, peak RSS {r['peak_rss_mb']:,.0f} MB"
            )
    dv = results["docvec"]
    if "error" in dv:
        return
    fp32, bf16 = results.get("torch fp32", {}), results.get("torch bf16", {})
    print(
        "\nflash attention (FA) is llama.cpp's setting for the language model; the vision encoder's is"
        "\nmtmd's own (auto: on, on a CPU) in both columns"
    )
    worst: dict[str, float] = {}
    if "pairs" in fp32:
        _parity(dv, fp32, bf16, parity_budget, args, worst)
    _per_page(dv, bf16, fp32, budgets, parity_budget)
    if args.searches:
        _searches(dv, bf16, args, search_budget)

    # 4. the summary: the setting changes the language model's attention only, so its time decides
    runs = dv["pairs"][str(search_budget)]
    n = {fa: sum(r["pages"] for r in runs[fa]) for fa in ("on", "off")}
    per = {fa: sum(r["wall"] for r in runs[fa]) / n[fa] for fa in ("on", "off")}
    lm = {fa: sum(r["language"] for r in runs[fa]) / n[fa] for fa in ("on", "off")}
    faster, slower = ("on", "off") if lm["on"] <= lm["off"] else ("off", "on")
    line = (
        f"\n4. summary: flash attention {faster} is faster on this CPU at {search_budget} tokens in the"
        f" language model, the part\n   it changes ({lm[faster]:.2f} s/page against {lm[slower]:.2f}, "
        f"{lm[slower] / lm[faster]:.2f}x; whole page {per[faster]:.2f} against {per[slower]:.2f} s, with the "
        f"vision\n   encoder's noise); the profile's default is FA {'on' if dv['fa_default'] else 'off'}"
    )
    if faster in worst:
        ok = "within" if worst[faster] < BAR else "NOT within"
        line += (
            f";\n   with FA {faster}, max |score diff| against torch fp32 is {worst[faster]:.1e}, {ok} the "
        )
        line += f"{BAR:.0e} bar"
        if slower in worst:
            ok = "within" if worst[slower] < BAR else "not within"
            line += f" (FA {slower}: {worst[slower]:.1e}, {ok})"
    else:
        line += "; parity not measured (--skip-torch / --skip-fp32)"
    print(line)


def _parity(
    dv: dict[str, Any],
    fp32: dict[str, Any],
    bf16: dict[str, Any],
    b: int,
    args: argparse.Namespace,
    worst: dict[str, float],
) -> None:
    ref = fp32["pairs"][str(b)]
    ref_s = [s for r in ref for s in r["scores"]]
    ref_m = [m for r in ref for m in r["margins"]]
    print(
        f"\n1. parity at {b} image tokens: {len(ref)} queries x {args.pages} pages against torch fp32 "
        f"(its scores {min(ref_s):.4f}..{max(ref_s):.4f},\n   margins {min(ref_m):+.3f}..{max(ref_m):+.3f}; "
        "margin = logit of the score = (head[yes] - head[no]) . h)"
    )
    head = f"   {'engine':<22}{'max |score diff|':>18}{'same ranking':>14}{'same yes/no':>13}"
    print(head + f"{'max |margin diff|':>19}")
    rows: list[tuple[str, list[list[float]]]] = [
        (f"docvec FA {fa}", [r["scores"] for r in dv["pairs"][str(b)][fa]]) for fa in ("on", "off")
    ]
    if "pairs" in bf16 and str(b) in bf16["pairs"]:
        rows.append(("torch bf16 (official)", [r["scores"] for r in bf16["pairs"][str(b)]]))
    for name, scores in rows:
        pairs = [
            (s, t, m)
            for got, r in zip(scores, ref, strict=True)
            for s, t, m in zip(got, r["scores"], r["margins"], strict=True)
        ]
        ds = max(abs(s - t) for s, t, _ in pairs)
        dm = max(abs(_logit(s) - m) for s, _, m in pairs)
        rank = all(
            sorted(range(len(got)), key=lambda i: -got[i])
            == sorted(range(len(got)), key=lambda i: -r["scores"][i])
            for got, r in zip(scores, ref, strict=True)
        )
        yes = all((s > 0.5) == (t > 0.5) for s, t, _ in pairs)
        print(f"   {name:<22}{ds:>18.2e}{'yes' if rank else 'NO':>14}{'yes' if yes else 'NO':>13}{dm:>19.2e}")
        if name.startswith("docvec FA "):
            worst[name.removeprefix("docvec FA ")] = ds
    print(
        "   (same ranking: each query's pages in the same order; same yes/no: score > 0.5 on the same"
        + " pairs"
        + (f";\n   at {b} tokens, not the profile's 1,024" if b != 1024 else "")
        + ")"
    )


def _per_page(
    dv: dict[str, Any], bf16: dict[str, Any], fp32: dict[str, Any], budgets: list[int], pb: int
) -> None:
    print(
        "\n2. seconds per candidate page, on the same pairs for every engine (llama.cpp: one score() call"
        "\n   per query, split into vision + language model + the query prefix's share; torch: one forward"
        " per pair)"
    )
    head = f"   {'tokens':>7}{'pairs':>6}{'llama.cpp FA on (vis+LM+pre)':>32}"
    head += f"{'llama.cpp FA off (vis+LM+pre)':>33}{'torch bf16':>12}{'bf16/on':>9}{'bf16/off':>9}"
    head += f"{'CPU use on/off/bf16':>21}"
    print(head)
    mismatch: list[int] = []
    for b in budgets:
        if str(b) not in dv["pairs"]:
            continue
        cells, per = [], {}
        for fa in ("on", "off"):
            runs = dv["pairs"][str(b)][fa]
            n = sum(r["pages"] for r in runs)
            per[fa] = sum(r["wall"] for r in runs) / n
            vis, lm, pre = (sum(r[k] for r in runs) / n for k in ("vision", "language", "prefix"))
            cells.append(f"{per[fa]:.2f} ({vis:.2f}+{lm:.2f}+{pre:.2f})")
        runs = dv["pairs"][str(b)]["on"]
        n = sum(r["pages"] for r in runs)
        row = f"   {sum(r['tokens'] for r in runs) / n:>7.0f}{n:>6}{cells[0]:>32}{cells[1]:>33}"
        if "pairs" in bf16 and str(b) in bf16["pairs"]:
            theirs = [k for r in bf16["pairs"][str(b)] for k in r["tokens"]]
            if abs(sum(theirs) / len(theirs) - sum(r["tokens"] for r in runs) / n) > 0.5:
                mismatch.append(b)
            t = statistics.fmean(w for r in bf16["pairs"][str(b)] for w in r["walls"])
            row += f"{t:>12.2f}{t / per['on']:>8.2f}x{t / per['off']:>8.2f}x"
        uses = [_cpu_use(dv["pairs"][str(b)][fa]) for fa in ("on", "off")]
        uses.append(_cpu_use(bf16.get("pairs", {}).get(str(b), [])))
        if any(u is not None for u in uses):
            row += f"{'/'.join('-' if u is None else f'{u:.0%}' for u in uses):>21}"
        print(row)
    if mismatch:
        print(f"   WARNING: torch's image tokens a page differ from docvec's at {mismatch} tokens")
    if "pairs" in fp32:
        walls = [w for r in fp32["pairs"][str(pb)] for w in r["walls"]]
        print(f"   torch fp32 (the parity reference) at {pb} tokens: {statistics.fmean(walls):.2f} s/page")
    print(
        "   (tokens: image tokens a page; the rest of llama.cpp's time is decoding and resizing the images;"
        "\n   bf16/on: torch bf16's time over llama.cpp's, >1 = docvec faster; CPU use: CPU seconds over"
        "\n   wall x threads of those calls, under 100% where other processes took the cores)"
    )


def _searches(dv: dict[str, Any], bf16: dict[str, Any], args: argparse.Namespace, b: int) -> None:
    fa = dv["search_fa"]
    why = {"faster": "the faster language model in 2.", "default": "the profile's default"}.get(
        args.search_fa, "--search-fa"
    )
    how = (
        "each N its own search"
        if args.separate_searches
        else f"one search of {max(args.searches)} candidates per column,\n   timed when its N-th was scored"
    )
    print(
        f'\n3. seconds per search of N candidates at {b} tokens, all measured but torch\'s "computed" ones\n'
        f"   (llama.cpp: FA {fa}, {why}; {how};\n   torch bf16: the official loop, one forward per pair)"
    )
    print(f"   {'N':>4}{'reuse_prefix':>14}{'no reuse':>10}{'saved':>8}{'torch bf16':>20}{'bf16/reuse':>12}")
    per_page = None
    if bf16.get("search"):
        n0 = max(int(n) for n in bf16["search"])
        per_page = bf16["search"][str(n0)] / n0
    for n in args.searches:
        s = dv["search"][str(n)]
        reuse, no = s["reuse"]["wall"], s["no_reuse"]["wall"]
        row = f"   {n:>4}{reuse:>14.2f}{no:>10.2f}{1 - reuse / no:>8.1%}"
        t: float | None = None
        if str(n) in bf16.get("search", {}):
            t, kind = bf16["search"][str(n)], "measured"
        elif per_page is not None:
            t, kind = n * per_page, "computed"
        if t is not None:
            row += f"{t:>11.1f} {kind:>8}{t / reuse:>11.2f}x"
        print(row)
    top = dv["search"][str(max(args.searches))]
    r, nr = top["reuse"], top["no_reuse"]
    print(
        f"   query prefix decoding, measured inside the searches of {r['pages']}: {r['prefix']:.2f} s with"
        f"\n   reuse_prefix (once), {nr['prefix']:.2f} s without ({nr['prefix'] / nr['pages']:.2f} s a page, "
        f"{nr['prefix'] / nr['total']:.1%} of the search's time):"
        '\n   what reusing the prefix can save; the "saved" column measures it, with the noise of the run'
    )
    uses = [r.get("cpu_use"), nr.get("cpu_use"), *bf16.get("search_cpu_use", {}).values()]
    if any(u is not None for u in uses):
        print(
            "   CPU use: reuse_prefix search "
            + " / ".join(
                f"{label} {u:.0%}"
                for label, u in zip(["", "no reuse", "torch"], uses, strict=False)
                if u is not None
            ).strip()
        )
    if not args.separate_searches:
        prep = r["total"] - r["prefix"] - r["vision"] - r["language"]
        print(
            f"   (score() decodes and resizes all its candidates first: {prep:.2f} s for {r['pages']} in the "
            "reuse_prefix search,\n   counted in every N of it)"
        )
    if per_page is not None and any(str(n) not in bf16["search"] for n in args.searches):
        n0 = max(int(n) for n in bf16["search"])
        print(
            f'   (torch bf16 "computed" = N x {per_page:.2f} s, its per-page time in its measured search of '
            f"N={n0}:\n   not run, to keep the benchmark's time bounded; its loop shares no work between"
            " pages)"
        )


if __name__ == "__main__":
    main()
