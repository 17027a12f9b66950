# docvec's image: the `docvec` CLI and API, the Prefect flows (flows/, prefect.yaml) and a Prefect worker,
# with llama-cpp-python built from our pinned, patched source by llama.cpp/build.sh.
#
#   docker build -t docvec .                          # CPU: a portable x86-64 (AVX2) or arm64 build
#   docker build -t docvec:cuda \                     # NVIDIA: see docs/deploy.md and docker-compose.gpu.yml
#     --build-arg BUILD_IMAGE=nvidia/cuda:12.8.1-devel-ubuntu24.04 \
#     --build-arg RUNTIME_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04 \
#     --build-arg CMAKE_ARGS="-DGGML_CUDA=on -DGGML_NATIVE=off -DCMAKE_CUDA_ARCHITECTURES=90" .
#
# Two stages: `build` has the compilers and produces wheels only; `runtime` installs those wheels with pip
# (no index, no compilers) into a virtual environment. The wheels are made for the build stage's
# interpreter, so BUILD_IMAGE and RUNTIME_IMAGE must be the same distribution and Python
# (python:3.11-slim-bookworm twice, or the CUDA devel/runtime pair of one Ubuntu release).
# Needs BuildKit (the default builder since Docker 23) for the cache and bind mounts below.

ARG BUILD_IMAGE=python:3.11-slim-bookworm
ARG RUNTIME_IMAGE=python:3.11-slim-bookworm

FROM ${BUILD_IMAGE} AS build
# -DGGML_NATIVE=off: build.sh's default is -march=native, which would tie the image to the CPU type of the
# machine that built it; off gives llama.cpp's portable baseline (AVX2/FMA/F16C on x86-64).
ARG CMAKE_ARGS="-DGGML_NATIVE=off"
ARG DEBIAN_FRONTEND=noninteractive
# python3 is already there in the python images; the CUDA images (Ubuntu) have none.
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake patch ca-certificates \
    && if ! command -v python3 >/dev/null; then \
         apt-get install -y --no-install-recommends python3 python3-dev python3-venv; \
       fi \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/build && /opt/build/bin/pip install --no-cache-dir --quiet --upgrade pip

WORKDIR /src
# llama-cpp-python first, from llama.cpp/ alone, so that editing docvec's code does not invalidate it.
# build.sh keeps the sdist and one wheel per (version, CMAKE_ARGS, patches, arch) under DOCVEC_CACHE_DIR; a
# BuildKit cache mount there makes a rebuild of the image reuse the ~12-minute compile. It records the
# wheel it installed in $VIRTUAL_ENV/.docvec-llama-wheel: that is the one copied out of the cache.
COPY llama.cpp/ llama.cpp/
RUN --mount=type=cache,id=docvec-llama-cpp-python,target=/cache,sharing=locked \
    DOCVEC_CACHE_DIR=/cache CMAKE_ARGS="${CMAKE_ARGS}" bash llama.cpp/build.sh --python /opt/build/bin/python \
    && mkdir -p /llama \
    && cp "$(cat /opt/build/.docvec-llama-wheel)" /llama/

# The rest of the context (.dockerignore lets through only what the image needs). `pip wheel` builds
# docvec's wheel and fetches (or builds, here where compilers are) a wheel for every dependency of
# docvec[server,flows] and of the llama-cpp-python wheel, resolved together so that docvec's pins hold.
COPY . .
RUN --mount=type=cache,target=/root/.cache/pip \
    /opt/build/bin/pip wheel --quiet --wheel-dir /wheels ".[server,flows]" /llama/llama_cpp_python-*.whl
# What a Prefect worker runs: the flows, and prefect.yaml (the deployments) when the repository has it.
RUN mkdir -p /app \
    && cp -r flows /app/flows \
    && if [ -f prefect.yaml ]; then cp prefect.yaml /app/; fi

FROM ${RUNTIME_IMAGE} AS runtime
# Repeated here only to decide whether the import check below can load llama.cpp (a CUDA build needs the
# driver's libcuda, which the NVIDIA container toolkit mounts at run time, not at build time).
ARG CMAKE_ARGS="-DGGML_NATIVE=off"
ARG DEBIAN_FRONTEND=noninteractive
# No compilers. libgomp1: llama.cpp's CPU backend links OpenMP (libggml-cpu.so needs libgomp.so.1).
# tesseract-ocr and its English model: the text of scanned pages (docs/text.md; DOCVEC_OCR).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates libgomp1 tesseract-ocr tesseract-ocr-eng \
    && if ! command -v python3 >/dev/null; then \
         apt-get install -y --no-install-recommends python3 python3-venv; \
       fi \
    && rm -rf /var/lib/apt/lists/*
# The wheels are bind-mounted from the build stage, not copied: they stay out of the image's layers.
# --no-index: nothing is fetched or compiled here; a missing wheel fails the build.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python3 -m venv /opt/docvec \
    && /opt/docvec/bin/pip install --no-cache-dir --quiet --no-index --find-links /wheels \
         "docvec[server,flows]" llama_cpp_python \
    && /opt/docvec/bin/docvec --version \
    && /opt/docvec/bin/python -c "import docvec, prefect, qdrant_client" \
    && case "${CMAKE_ARGS}" in \
         *GGML_CUDA=on*|*GGML_CUDA=ON*) ;; \
         *) /opt/docvec/bin/python -c "import llama_cpp, llama_cpp.mtmd_cpp" ;; \
       esac

# A fixed uid above the range images and distributions hand out (the CUDA images have `ubuntu` at 1000),
# so that host folders can be given to it.
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/docvec docvec \
    && mkdir -p /data /cache /documents \
    && chown docvec:docvec /data /cache
COPY --from=build /app /app

# /data: the index's data (page images, uploads; the embedded store when no Qdrant URL is set).
# /cache: models (HF_HOME, where `docvec models pull` downloads) and docvec's cache.
ENV PATH=/opt/docvec/bin:$PATH \
    DOCVEC_DATA_DIR=/data \
    DOCVEC_CACHE_DIR=/cache \
    HF_HOME=/cache/huggingface \
    PYTHONUNBUFFERED=1
USER docvec
WORKDIR /app
VOLUME ["/data", "/cache"]
EXPOSE 8000
# For the default command (the API); docker-compose.yml gives the worker its own check. /healthz answers
# 503 until the model is loaded and the store answers; urlopen raises on it, so the exit status is 1.
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
    CMD ["python3", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/healthz', timeout=8)"]
CMD ["docvec", "serve", "--host", "0.0.0.0", "--port", "8000"]
