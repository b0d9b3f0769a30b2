"""`configure_logging`: text by default, one JSON object per line with `json`, uvicorn's included."""

from __future__ import annotations

import json
import logging

import pytest

from appliance.logs import configure_logging


@pytest.fixture(autouse=True)
def restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)


def test_json_lines_with_fields_and_tracebacks(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    logging.getLogger("uvicorn.error").info("Started server process [%d]", 7)
    logging.getLogger("appliance.access").info("{...}", extra={"fields": {"event": "request", "status": 200}})
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("appliance.api").exception("unhandled error on %s", "GET /x")
    logging.getLogger("appliance.x").debug("not shown at info")
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["logger"] for line in lines] == ["uvicorn.error", "appliance.access", "appliance.api"]
    assert lines[0]["message"] == "Started server process [7]" and lines[0]["level"] == "info"
    assert lines[0]["time"].endswith("Z") and "T" in lines[0]["time"]
    assert lines[1]["event"] == "request" and lines[1]["status"] == 200 and "message" not in lines[1]
    assert lines[2]["level"] == "error" and "ValueError: boom" in lines[2]["exception"]


def test_text_stays_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging()
    logging.getLogger("appliance.access").info('{"event":"request"}', extra={"fields": {"event": "request"}})
    assert capsys.readouterr().out.rstrip().endswith(' INFO appliance.access: {"event":"request"}')


def test_engines_are_told_how_the_server_logs() -> None:
    from appliance.logs import current_logging

    configure_logging("warning", "json")
    assert current_logging() == ("warning", "json")
    configure_logging("debug")
    assert current_logging() == ("debug", "text")


def test_capped_keeps_both_ends_and_says_how_much_was_cut() -> None:
    from appliance.logs import capped

    assert capped("short", 10) == "short"
    cut = capped("a" * 500 + "b" * 500, 100)
    assert len(cut) <= 100 and cut.startswith("a" * 30) and cut.endswith("b" * 30) and "[932 chars cut]" in cut


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_no_message_field_or_traceback_makes_a_line_long(capsys: pytest.CaptureFixture[str], log_format) -> None:
    from appliance.logs import MAX_LOGGED_CHARS, MAX_TRACEBACK_CHARS

    configure_logging("info", log_format)
    huge = "x" * 1_000_000
    logging.getLogger("appliance.api").info("unhandled error on %s %s", "GET", huge)
    logging.getLogger("appliance.access").info("%s", huge, extra={"fields": {"event": "request", "user": huge}})
    try:
        raise ValueError(huge)
    except ValueError:
        logging.getLogger("appliance.api").exception("failed")
    out = capsys.readouterr().out
    assert "chars cut" in out and len(out) < 2 * MAX_LOGGED_CHARS + MAX_TRACEBACK_CHARS + 1000, len(out)
    if log_format == "json":  # still one JSON object per line
        lines = [json.loads(line) for line in out.splitlines()]
        assert lines[1]["user"].endswith("x" * 100) and len(lines[1]["user"]) <= MAX_LOGGED_CHARS
        assert lines[2]["exception"].endswith("x" * 100) and len(lines[2]["exception"]) <= MAX_TRACEBACK_CHARS
