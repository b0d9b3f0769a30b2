"""The chat playground (issue 17) in a real browser: Debian's Chromium, headless, driven by
Playwright, against the real server with demo-smol (a trained model: greedy answers are exact) and
demo-vision (random weights, takes images).

Skipped, saying why, when Playwright (the test extras) or Chromium (`apt-get install chromium`;
another binary with PLAYGROUND_CHROMIUM) is missing. With PLAYGROUND_SCREENSHOTS=DIR the tests also
save the screenshots of docs/playground.md there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image, ImageDraw

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.images import encode

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (pip install -e '.[test]', or ./setup.sh)"
)

CHROMIUM = os.environ.get("PLAYGROUND_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).is_file():
    pytest.skip(
        f"Chromium not found at {CHROMIUM} (Debian: apt-get install chromium; or set PLAYGROUND_CHROMIUM)",
        allow_module_level=True,
    )

# Headless as root in a sandbox-less container, and nothing that phones home (the network is closed:
# Chromium's own background connections would only fail, noisily).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = os.environ.get("PLAYGROUND_SCREENSHOTS")
SMOL, VISION = "demo-smol", "demo-vision"
API_KEY = "playground-test-key"
# Forced on demo-smol's output by a structured-output choice: a model answer full of HTML.
HOSTILE = (
    '<img src=x onerror="window.pwned=1"> **bold** and `<b>code</b>`\n\n'
    "```html\n<script>window.pwned=2</script>\n```\n\n"
    "[a link](javascript:window.pwned=3)"
)


@pytest.fixture(scope="module")
def playground_server(
    smol_root: Path, demo_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    base = tmp_path_factory.mktemp("playground")
    graphs = base / "graphs"
    graphs.mkdir()
    copy_demo_graphs(smol_root, graphs, [SMOL])
    copy_demo_graphs(demo_root, graphs, [VISION])
    with running_server(graphs, base / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def keyed_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    base = tmp_path_factory.mktemp("playground-keys")
    graphs = base / "graphs"
    graphs.mkdir()
    copy_demo_graphs(demo_root, graphs, [VISION])
    (base / "keys").write_text(f"{API_KEY}\n")
    with running_server(graphs, base / "server.log", "--api-key-file", str(base / "keys")) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        # Playwright gives each launch a fresh, empty profile (--user-data-dir) of its own.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        yield launched
        launched.close()


class Tab:
    """A page of the playground, with what it said in its console (errors and uncaught exceptions)
    and the bodies it posted to /v1/chat/completions."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        self.chat_bodies: list[dict] = []
        page.on("console", lambda message: message.type == "error" and self.errors.append(message.text))
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        page.on("request", self._record)

    def _record(self, request: Any) -> None:
        if request.url.endswith("/v1/chat/completions"):
            self.chat_bodies.append(json.loads(request.post_data))


@pytest.fixture
def tab(browser: Any, playground_server: RunningServer) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1280, "height": 820}, base_url=playground_server.url)
    opened = Tab(context.new_page())
    opened.page.goto("/")
    opened.page.wait_for_function("() => document.querySelector('#model').options.length === 2")
    yield opened
    context.close()


def settings(page: Any, *, model: str, temperature: str = "0", max_tokens: str = "64", extra: object = None) -> None:
    page.select_option("#model", model)
    page.fill("#temperature", temperature)
    page.fill("#max-tokens", max_tokens)
    page.fill("#extra", json.dumps(extra) if extra is not None else "")


def ask(page: Any, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def last_answer(page: Any, timeout: float = 90_000) -> dict[str, str]:
    """The newest answer once finished: its text and its stats line."""
    page.wait_for_selector("#transcript .turn.assistant:last-child.done", timeout=timeout)
    answer = page.locator("#transcript .turn.assistant").last
    return {"text": answer.locator(".content").inner_text(), "stats": answer.locator(".stats").inner_text()}


def wait_idle(server: RunningServer, model: str, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = httpx.get(f"{server.url}/health", timeout=5).json()["models"][model]
        if (status["in_flight"] == 0 and status["running"] == 0) or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def screenshot(page: Any, name: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / name))


def picture() -> bytes:
    """A small drawn scene (sky, sun, hills): what a user might attach."""
    image = Image.new("RGB", (160, 120), (120, 180, 235))
    draw = ImageDraw.Draw(image)
    draw.ellipse((110, 12, 145, 47), fill=(250, 210, 60))
    draw.polygon([(0, 120), (0, 80), (50, 60), (100, 85), (160, 70), (160, 120)], fill=(70, 150, 80))
    draw.rectangle((30, 78, 52, 100), fill=(170, 60, 50))
    return encode(image)


def test_page_loads_without_console_errors(tab: Tab) -> None:
    page = tab.page
    assert page.url.endswith("/playground")  # / redirected
    options = page.eval_on_selector_all("#model option", "nodes => nodes.map(node => [node.value, node.textContent])")
    assert options == [[SMOL, SMOL], [VISION, f"{VISION} (vision)"]]
    assert page.is_hidden("#key-form")  # no keys on this server
    page.select_option("#model", SMOL)
    assert page.is_hidden("#attach")  # a text model takes no images
    page.select_option("#model", VISION)
    assert page.is_visible("#attach")
    page.wait_for_timeout(300)
    assert tab.errors == []


def test_an_answer_streams_from_the_real_model(tab: Tab, playground_server: RunningServer) -> None:
    page = tab.page
    settings(page, model=SMOL)
    ask(page, "What is the capital of France?")
    answer = last_answer(page)
    assert "Paris" in answer["text"]
    assert re.search(
        r"TTFT \d+ ms · [\d.]+ tokens/s · 37 prompt \+ 8 completion tokens · finish: stop", answer["stats"]
    )
    body = tab.chat_bodies[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0 and body["max_tokens"] == 64
    assert body["messages"] == [{"role": "user", "content": "What is the capital of France?"}]
    assert tab.errors == []


def test_history_system_prompt_and_clear(tab: Tab) -> None:
    page = tab.page
    settings(page, model=SMOL, max_tokens="8")
    page.fill("#system", "Be brief.")
    ask(page, "What is the capital of France?")
    first = last_answer(page)["text"]
    ask(page, "And of Germany?")
    last_answer(page)
    assert page.locator("#transcript .turn").count() == 4
    assert tab.chat_bodies[-1]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": first},
        {"role": "user", "content": "And of Germany?"},
    ]
    page.click("#clear")
    assert page.locator("#transcript .turn").count() == 0
    ask(page, "Hi")
    last_answer(page)
    assert [message["role"] for message in tab.chat_bodies[-1]["messages"]] == ["system", "user"]


def test_copy_puts_the_answer_on_the_clipboard(tab: Tab) -> None:
    page = tab.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    settings(page, model=SMOL)
    ask(page, "What is the capital of France?")
    text = last_answer(page)["text"]
    page.locator("#transcript .turn.assistant .copy-answer").last.click()
    assert page.evaluate("navigator.clipboard.readText()") == text


def test_stop_cancels_the_request_on_the_server(tab: Tab, playground_server: RunningServer) -> None:
    page = tab.page
    settings(page, model=SMOL, max_tokens="1024", extra={"ignore_eos": True})
    ask(page, "Write a Python function that checks whether a number is prime, and explain it.")
    shown = 450 if SCREENSHOTS else 20  # characters of the answer; a screenshot shows its code block
    page.wait_for_function(
        "shown => document.querySelector('#transcript .turn.assistant .content').textContent.length > shown",
        arg=shown,
    )
    screenshot(page, "playground-stream.png")
    assert page.is_enabled("#stop-button") and page.is_disabled("#send")
    page.click("#stop-button")
    answer = last_answer(page, timeout=10_000)
    assert "stopped" in answer["stats"] and answer["text"]
    assert page.is_enabled("#send") and page.is_disabled("#stop-button")
    status = wait_idle(playground_server, SMOL)
    assert status["in_flight"] == 0 and status["running"] == 0
    # The access log line of that request: cancelled, long before its 1024 tokens.
    deadline = time.monotonic() + 10
    while not (lines := _chat_log_lines(playground_server, "cancelled")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert lines and lines[-1]["completion_tokens"] < 1024, playground_server.log_tail(10)
    assert tab.errors == []


def _chat_log_lines(server: RunningServer, finish_reason: str) -> list[dict]:
    marker = '{"event":"request"'
    lines = [json.loads(line[line.index(marker) :]) for line in server.log().splitlines() if marker in line]
    return [
        line for line in lines if line["path"] == "/v1/chat/completions" and line.get("finish_reason") == finish_reason
    ]


def test_an_image_goes_to_the_vision_model(tab: Tab, tmp_path: Path) -> None:
    page = tab.page
    (tmp_path / "scene.png").write_bytes(picture())
    settings(page, model=VISION, temperature="0", max_tokens="24")
    page.set_input_files("#file", str(tmp_path / "scene.png"))
    page.wait_for_selector("#attachments .attachment img")
    ask(page, "What is in this picture?")
    answer = last_answer(page)
    assert "finish:" in answer["stats"]
    assert page.locator("#transcript .turn.user img.sent-image").count() == 1
    content = tab.chat_bodies[-1]["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "What is in this picture?"}
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert page.locator("#attachments .attachment").count() == 0
    screenshot(page, "playground-vision.png")
    assert tab.errors == []


def test_a_pasted_image_is_attached(tab: Tab) -> None:
    page = tab.page
    page.select_option("#model", VISION)
    page.evaluate(
        """async (bytes) => {
            const file = new File([new Uint8Array(bytes)], "pasted.png", { type: "image/png" });
            const data = new DataTransfer();
            data.items.add(file);
            const prompt = document.querySelector("#prompt");
            prompt.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
        }""",
        list(picture()),
    )
    page.wait_for_selector("#attachments .attachment img")
    assert page.eval_on_selector("#attachments img", "image => image.src").startswith("data:image/png;base64,")
    page.click("#attachments .attachment button")
    assert page.locator("#attachments .attachment").count() == 0


def test_html_in_an_answer_is_shown_as_text(tab: Tab) -> None:
    page = tab.page
    settings(page, model=SMOL, max_tokens="200", extra={"structured_outputs": {"choice": [HOSTILE]}})
    ask(page, "Say something.")
    last_answer(page)
    content = page.locator("#transcript .turn.assistant .content").last
    assert '<img src=x onerror="window.pwned=1">' in content.inner_text()
    assert content.locator("code").first.inner_text() == "<b>code</b>"
    assert content.locator("pre code").inner_text() == "<script>window.pwned=2</script>"
    assert content.locator("strong").inner_text() == "bold"  # Markdown itself is rendered
    assert content.locator("img, script, b, a").count() == 0  # the javascript: link stays text
    assert page.evaluate("window.pwned") is None
    assert tab.errors == []


def test_an_api_key_is_asked_for_and_sent(browser: Any, keyed_server: RunningServer) -> None:
    context = browser.new_context(base_url=keyed_server.url)
    page = context.new_page()
    try:
        page.goto("/playground")
        page.wait_for_selector("#key-form:not([hidden])")
        assert "needs an API key" in page.inner_text("#status")
        page.fill("#api-key", "wrong")
        page.click("#key-form button")
        page.wait_for_function("() => document.querySelector('#status').textContent.includes('refused')")
        page.fill("#api-key", API_KEY)
        page.click("#key-form button")
        page.wait_for_function("() => document.querySelector('#model').options.length === 1")
        assert page.evaluate("sessionStorage.getItem('appliance.playground.apiKey')") == API_KEY
        settings(page, model=VISION, max_tokens="4")
        ask(page, "Hi")
        assert "4 completion tokens" in last_answer(page)["stats"]
        page.reload()  # the key stays for the tab's session
        page.wait_for_function("() => document.querySelector('#model').options.length === 1")
    finally:
        context.close()


MARKDOWN_CASES = [
    ("# Title\n\nSome *soft* and **strong** `code`.", "<h3>Title</h3><p>Some <em>soft</em> and <strong>strong</strong> <code>code</code>.</p>"),
    ("- one\n- two\n\n3. three\n4. four", '<ul><li>one</li><li>two</li></ul><ol start="3"><li>three</li><li>four</li></ol>'),
    ("> quoted <b>", "<blockquote><p>quoted &lt;b&gt;</p></blockquote>"),
    ("line one\nline two\n\n---", "<p>line one<br>line two</p><hr>"),
    ("[site](https://example.com/a?b=1) [bad](javascript:alert(1)) [data](data:text/html,x)",
     '<p><a href="https://example.com/a?b=1" rel="noopener noreferrer nofollow" target="_blank">site</a>'
     " [bad](javascript:alert(1)) [data](data:text/html,x)</p>"),
    ("![pic](https://example.com/p.png)", '<p>!<a href="https://example.com/p.png" rel="noopener noreferrer nofollow" target="_blank">pic</a></p>'),
    ("<img src=x onerror=alert(1)>", "<p>&lt;img src=x onerror=alert(1)&gt;</p>"),
]  # fmt: skip


def test_the_markdown_renderer_builds_elements_and_text_only(tab: Tab) -> None:
    rendered = tab.page.evaluate(
        """async (cases) => {
            const { renderMarkdown } = await import("/playground/markdown.js");
            return cases.map((source) => {
                const holder = document.createElement("div");
                holder.append(renderMarkdown(source));
                return holder.innerHTML;
            });
        }""",
        [source for source, _ in MARKDOWN_CASES],
    )
    assert rendered == [html for _, html in MARKDOWN_CASES]


def test_an_unclosed_code_fence_is_code_while_the_answer_streams(tab: Tab) -> None:
    code = tab.page.evaluate(
        """async () => {
            const { renderMarkdown } = await import("/playground/markdown.js");
            const holder = document.createElement("div");
            holder.append(renderMarkdown("Here:\\n```js\\nconst a = '<b>';\\nconst b"));
            return [holder.querySelector(".code-bar span").textContent, holder.querySelector("pre code").textContent];
        }"""
    )
    assert code == ["js", "const a = '<b>';\nconst b"]
