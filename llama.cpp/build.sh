#!/usr/bin/env bash
# Builds and installs docvec's managed llama-cpp-python into the active Python environment.
#
#   llama.cpp/build.sh [--python PY]
#
# 1. downloads the pinned source release (llama.cpp/pin.env) from PyPI, checks its sha256;
# 2. unpacks it under the cache folder, where docvec finds the conversion tools and the Qwen2 vocabulary
#    that the wheel does not ship, and applies our patches (llama.cpp/patches/*.patch, each with its reason
#    in its header);
# 3. builds the wheel once per (version, CMAKE_ARGS, patches) and keeps it, so a second set-up installs in
#    seconds instead of compiling for ~12 minutes;
# 4. installs it.
#
# Environment: DOCVEC_CACHE_DIR (default ~/.cache/docvec), CMAKE_ARGS (passed to llama.cpp's CMake:
# "-DGGML_CUDA=on" for NVIDIA GPUs, "-DGGML_METAL=on" on Apple silicon (the default there),
# "-DGGML_NATIVE=off" for a wheel that runs on other x86 CPUs), CMAKE_BUILD_PARALLEL_LEVEL (build jobs).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
if [[ ${1:-} == --python ]]; then py=$2; fi
# shellcheck source=pin.env
source "$here/pin.env"
v=$LLAMA_CPP_PYTHON_VERSION
cache=${DOCVEC_CACHE_DIR:-$HOME/.cache/docvec}
root="$cache/llama-cpp-python/$v"
sdist="$root/llama_cpp_python-$v.tar.gz"
mkdir -p "$root"

if [[ ! -f $sdist ]] || ! echo "$LLAMA_CPP_PYTHON_SHA256  $sdist" | sha256sum -c --quiet 2>/dev/null; then
  echo "llama.cpp/build.sh: downloading llama-cpp-python $v source" >&2
  tmp=$(mktemp -d)
  "$py" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$v" -d "$tmp"
  echo "$LLAMA_CPP_PYTHON_SHA256  $tmp/llama_cpp_python-$v.tar.gz" | sha256sum -c --quiet \
    || { echo "llama.cpp/build.sh: sha256 mismatch for llama-cpp-python $v" >&2; exit 1; }
  mv "$tmp/llama_cpp_python-$v.tar.gz" "$sdist"
  rm -rf "$tmp"
fi

shopt -s nullglob
patch_files=("$here"/patches/*.patch)
patches=$(cat /dev/null "${patch_files[@]}" | sha256sum | cut -c1-12)
src_stamp="$root/src/.stamp"
if [[ ! -f $src_stamp || $(cat "$src_stamp") != "$LLAMA_CPP_PYTHON_SHA256-$patches" ]]; then
  rm -rf "$root/src"
  mkdir -p "$root/src"
  tar -xzf "$sdist" -C "$root/src"
  for p in "${patch_files[@]}"; do
    echo "llama.cpp/build.sh: applying $(basename "$p")" >&2
    patch -d "$root/src/llama_cpp_python-$v" -p1 --quiet < "$p"
  done
  echo "$LLAMA_CPP_PYTHON_SHA256-$patches" > "$src_stamp"
fi

# The default build is -march=native: a wheel built on one CPU type can use instructions another lacks
# (AVX-512, AMX) and die there with SIGILL, and a cache folder may be shared by machines of several types (a
# home on a network disk). So the key holds the instruction sets the compiler turns on here, as its macros.
isa=$(${CC:-cc} -march=native -dM -E -x c /dev/null 2>/dev/null \
  | grep -oE '__(AVX|AMX|SSE|FMA|F16C|BMI|ARM_FEATURE|ARM_NEON)[A-Za-z0-9_]*' | sort -u | tr '\n' ' ' || true)
key=$(printf '%s|%s|%s|%s|%s' "$v" "${CMAKE_ARGS:-}" "$patches" "$(uname -m)" "$isa" | sha256sum | cut -c1-16)
wheels="$root/wheels/$key"
built=("$wheels"/llama_cpp_python-"$v"-*.whl)
if [[ ${#built[@]} -eq 0 ]]; then
  echo "llama.cpp/build.sh: compiling llama-cpp-python $v (CMAKE_ARGS='${CMAKE_ARGS:-}'); ~12 min on 2 cores, once" >&2
  tmp=$(mktemp -d)
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
    "$py" -m pip wheel --quiet --no-deps "$root/src/llama_cpp_python-$v" -w "$tmp"
  mkdir -p "$wheels"
  mv "$tmp"/llama_cpp_python-"$v"-*.whl "$wheels"/
  rm -rf "$tmp"
  built=("$wheels"/llama_cpp_python-"$v"-*.whl)
fi
wheel=${built[0]:-}
if [[ ! -f $wheel ]]; then
  echo "llama.cpp/build.sh: no wheel was built in $wheels" >&2
  exit 1
fi

installed=$("$py" -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))' 2>/dev/null || true)
stamp_file=$("$py" -c 'import sys; print(sys.prefix)')/.docvec-llama-wheel
if [[ $installed != "$v" || ! -f $stamp_file || $(cat "$stamp_file") != "$wheel" ]]; then
  "$py" -m pip install --quiet --force-reinstall --no-deps "$wheel"
  # its own dependencies, without letting pip touch docvec's pins (numpy) when they already satisfy it
  "$py" -m pip install --quiet "$wheel"
  echo "$wheel" > "$stamp_file"
fi
echo "llama.cpp/build.sh: llama-cpp-python $v installed from $wheel" >&2
