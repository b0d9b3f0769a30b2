#!/bin/sh
# Build llama.cpp's `llama-server` offline, for `appliance bench --peer-command` (docs/bench.md).
#
#     scripts/build-llama-server.sh [DEST]        (default DEST: .cache/llama-server)
#
# No git clone and no internet beyond the package registry: the llama.cpp sources are vendored in
# the llama-cpp-python sdist (`vendor/llama.cpp`), which pip downloads like any package. The build
# takes about 6-7 minutes on 2 cores and both cores for all of it: not for CI, nor for a machine
# others are measuring on. Prints the binary and the LD_LIBRARY_PATH it needs (ggml's shared
# libraries sit next to it in build/bin).
#
# Environment: PYTHON (default .venv/bin/python, else python3) runs pip; LLAMA_CPP_PYTHON_VERSION
# pins the sdist (default: the newest); JOBS (default 2) build jobs; FORCE=1 rebuilds.
set -eu

dest=${1:-.cache/llama-server}
python=${PYTHON:-}
if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
jobs=${JOBS:-2}
spec=llama-cpp-python${LLAMA_CPP_PYTHON_VERSION:+==$LLAMA_CPP_PYTHON_VERSION}

for tool in cmake c++ tar; do
    command -v "$tool" >/dev/null || { echo "build-llama-server: $tool is needed" >&2; exit 1; }
done

mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
binary=$dest/build/bin/llama-server
if [ -x "$binary" ] && [ "${FORCE:-0}" != 1 ]; then
    echo "already built (FORCE=1 rebuilds): $binary"
else
    rm -rf "$dest/sdist" "$dest/src"
    mkdir -p "$dest/sdist" "$dest/src"
    # --no-binary: the sdist (with the vendored C++ sources), not a prebuilt wheel; --no-deps: its
    # Python dependencies are not needed to build the server.
    "$python" -m pip download "$spec" --no-deps --no-binary :all: --dest "$dest/sdist"
    archive=$(ls "$dest"/sdist/llama_cpp_python-*.tar.gz)
    tar -xzf "$archive" -C "$dest/src" --strip-components=1
    [ -f "$dest/src/vendor/llama.cpp/CMakeLists.txt" ] || {
        echo "build-llama-server: $archive has no vendor/llama.cpp" >&2
        exit 1
    }
    # GGML_NATIVE: this CPU's instruction set (AVX2, AVX-512, AMX...), as OpenVINO uses it; no
    # libcurl (nothing is downloaded at run time); only the server target.
    cmake -S "$dest/src/vendor/llama.cpp" -B "$dest/build" \
        -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
    cmake --build "$dest/build" --target llama-server -j "$jobs"
fi

echo "llama-server: $binary"
echo "run it with:  LD_LIBRARY_PATH=$dest/build/bin $binary --version"
LD_LIBRARY_PATH=$dest/build/bin "$binary" --version 2>&1 | head -n 2 || true
