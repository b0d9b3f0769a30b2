"""Settings precedence: flags > environment > settings file > defaults; unknown keys are errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.errors import ConfigError
from appliance.settings import Settings, load_settings


def test_defaults() -> None:
    assert load_settings({}, environ={}) == Settings()


def test_precedence(tmp_path: Path) -> None:
    config = tmp_path / "appliance.toml"
    config.write_text('port = 7000\nhost = "0.0.0.0"\nlog_level = "debug"\ndrain_seconds = 5\n')
    environ = {"APPLIANCE_PORT": "7100", "APPLIANCE_LOG_LEVEL": "warning", "APPLIANCE_METRICS_OPEN": "true"}
    settings = load_settings({"port": 7200, "host": None}, config=config, environ=environ)
    assert settings.port == 7200  # flag beats environment and file
    assert settings.log_level == "warning"  # environment beats file
    assert settings.host == "0.0.0.0"  # file beats default
    assert settings.drain_seconds == 5.0
    assert settings.metrics_open is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("prot = 1\n", "unknown key `prot`"),
        ('port = "x"\n', "port"),
        ("port = 70000\n", "port"),
        ("port = \n", "not valid TOML"),
        ("load_queue_size = 0\n", "load_queue_size"),
        ("min_resident_seconds = -1\n", "min_resident_seconds"),
        ("min_resident_seconds = inf\n", "min_resident_seconds"),
        ("min_resident_seconds = nan\n", "min_resident_seconds"),
        ("shutdown_delay_seconds = inf\n", "shutdown_delay_seconds"),
        ("write_timeout = inf\n", "write_timeout"),
        ("batch_lines_per_model = 0\n", "batch_lines_per_model"),
        ("batch_lines_per_model = 257\n", "batch_lines_per_model"),
        ("batch_grace_seconds = -0.1\n", "batch_grace_seconds"),
        ("batch_grace_seconds = nan\n", "batch_grace_seconds"),
    ],
)
def test_bad_settings_file(tmp_path: Path, text: str, expected: str) -> None:
    config = tmp_path / "appliance.toml"
    config.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings({}, config=config, environ={})
    assert str(config) in str(info.value) and expected in str(info.value)


def test_bad_environment_value() -> None:
    with pytest.raises(ConfigError, match="port"):
        load_settings({}, environ={"APPLIANCE_PORT": "eighty"})


def test_the_batch_lane_settings_reach_each_engine() -> None:
    from appliance.server import _engine_maker
    from tests.fakes import fake_graph

    assert (Settings().batch_lines_per_model, Settings().batch_grace_seconds) == (2, 0.5)
    settings = load_settings({"batch_lines_per_model": 1}, environ={"APPLIANCE_BATCH_GRACE_SECONDS": "0.05"})
    engine = _engine_maker(settings, None)(fake_graph())
    assert (engine.batch_lane.slots, engine.batch_lane.grace) == (1, 0.05)
    with pytest.raises(ConfigError) as refused:
        load_settings({}, environ={"APPLIANCE_BATCH_LINES_PER_MODEL": "0"})
    assert "batch_lines_per_model" in str(refused.value) and "\n" not in str(refused.value)


def test_missing_settings_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings({}, config=tmp_path / "nope.toml", environ={})
