# docvec's two entry points on a fresh machine: `make demo` (the main job) and `make test`.
# Both set up what they need first: a virtual environment with docvec and its pinned dependencies, and
# llama-cpp-python built from the pinned source (compiled once, ~12 min on 2 cores, then cached under
# $(DOCVEC_CACHE_DIR)/llama-cpp-python; set CMAKE_ARGS for GPUs, see llama.cpp/README.md).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.docvec-setup
# colpali-engine, the late-interaction models' reference (docvec_reference.colqwen), installed without its
# dependencies: they are docvec's own (torch, transformers) but for peft, which its model files do not use,
# and torchvision, whose PyPI wheels do not load beside the CPU build of torch ("operator torchvision::nms
# does not exist"); its model files need neither
COLPALI_ENGINE := 0.3.18

.PHONY: setup demo test lint browser ocr bench bench-full bench-ingest bench-search bench-text bench-reindex bench-rerank schemas docs clean

setup: $(STAMP)

$(STAMP): Makefile pyproject.toml llama.cpp/pin.env llama.cpp/build.sh $(wildcard llama.cpp/patches/*.patch)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps colpali-engine==$(COLPALI_ENGINE)
	bash llama.cpp/build.sh --python $(PY)
	touch $@

demo: setup
	$(VENV)/bin/docvec demo

lint: setup
	$(PY) -m ruff check src tests benchmarks flows
	$(PY) -m ruff format --check src tests benchmarks flows
	$(PY) -m mypy

# The web page is tested in a real headless Chromium, and the compose files with docker-compose's own
# validator (Debian's packages; installed here when missing; docker-compose without the Docker engine it
# recommends: the tests only run `docker-compose config`).
browser:
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	command -v docker-compose >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose)

# OCR of scanned pages (docs/text.md) reads with Debian's tesseract and its English model, which the tests of
# OCR need; the test of CJK text embedded with a real font takes WenQuanYi Zen Hei.
ocr:
	command -v tesseract >/dev/null && tesseract --list-langs 2>/dev/null | grep -qx eng || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng)
	test -f /usr/share/fonts/truetype/wqy/wqy-zenhei.ttc || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fonts-wqy-zenhei)

test: lint browser ocr
	$(PY) -m pytest

bench: setup
	$(PY) benchmarks/bench_embed.py

bench-full: setup
	$(PY) benchmarks/bench_embed.py --full

bench-ingest: setup
	$(PY) benchmarks/bench_ingest.py

bench-search: setup
	$(PY) benchmarks/bench_search.py

# the text mode's nDCG@10 against bm25s's on the same pages, and the fused mode's (docs/text.md)
bench-text: setup
	$(PY) benchmarks/bench_text_quality.py

bench-reindex: setup
	$(PY) benchmarks/bench_reindex.py

# the reranker: docvec (llama.cpp) against torch on Qwen3-VL-Reranker-2B's geometry, random weights: parity,
# seconds per page at 256/512/1024 image tokens, per search of 5/10/20 candidates (~1 h on 2 cores; --quick)
bench-rerank: setup
	$(PY) benchmarks/bench_rerank.py

schemas: setup
	$(PY) -m docvec._cli._schemas schemas

# docs/settings.md, from the settings model (src/docvec/_config.py); a test keeps it in sync
docs: setup
	$(PY) -m docvec._cli._docs docs

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
