"""The `appliance` command line: `serve` flags generated from `Settings`, every subcommand
described, fast start, and tools kept beside the core."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from appliance.cli import _parser, main
from appliance.commands import COMMANDS, serve
from appliance.settings import Settings
from appliance.tools import TOOLS
from tests.settings_env import clean_environment


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_setting_is_a_serve_flag_that_defaults_to_not_given() -> None:
    flags = {action.dest: action for action in _subparsers()["serve"]._actions}
    for field in msgspec.structs.fields(Settings):
        action = flags[field.name]
        assert action.option_strings == [f"--{field.name.replace('_', '-')}"]
        assert action.default is None  # so the environment and the settings file can apply
        if not isinstance(field.default, bool):
            assert "default" in action.help, field.name  # the value, or what empty means


def test_serve_flags_reach_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in Settings.__struct_fields__:
        monkeypatch.delenv(f"APPLIANCE_{name.upper()}", raising=False)
    monkeypatch.setenv("APPLIANCE_HOST", "0.0.0.0")
    config = tmp_path / "appliance.toml"
    config.write_text("port = 7000\ndrain_seconds = 5\n")
    args = _parser().parse_args(
        ["serve", "--config", str(config), "--port", "9000", "--allowed-hosts", "a, b,", "--tgi-compat",
         "--lmi-output-formatter", "sse", "--max-image-bytes", "4096"]
    )  # fmt: skip
    settings = serve.settings_from(args)
    assert (settings.port, settings.host, settings.drain_seconds) == (9000, "0.0.0.0", 5.0)
    assert settings.allowed_hosts == ("a", "b") and settings.tgi_compat and settings.lmi_output_formatter == "sse"
    assert settings.max_image_bytes == 4096 and settings.metrics_open is False


def test_serve_help_shows_defaults_from_the_settings() -> None:
    help_text = " ".join(_subparsers()["serve"].format_help().split())
    assert "port to listen on (default 8000)" in help_text
    assert "(default 32 MiB)" in help_text and "(default 30)" in help_text and "(default jsonlines)" in help_text


def test_every_subcommand_has_help_and_a_description() -> None:
    parsers = _subparsers()
    assert set(parsers) == {"serve", "config", "check", "devices", "models", "demo", "export", "bench", "soak", "tune"}
    assert len(COMMANDS) + len(TOOLS) == len(parsers)
    for name, parser in parsers.items():
        assert parser.description, name
    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert all(choice.help for choice in action._choices_actions)


def test_no_parser_accepts_abbreviated_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert not _parser().allow_abbrev
    assert not [name for name, parser in _subparsers().items() if parser.allow_abbrev]
    # Once read as --model-cache-dir X and --api-key-file secret (a file named "secret").
    for argv in (["serve", "--model", "X"], ["serve", "--api-key", "secret"], ["demo", ".", "--mod", "demo-chat"]):
        with pytest.raises(SystemExit) as exited:
            _parser().parse_args(argv)
        assert exited.value.code == 2
        assert "unrecognized arguments: " + argv[-2] in capsys.readouterr().err


def test_version_names_openvino_and_openvino_genai(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    with pytest.raises(SystemExit):
        _parser().parse_args(["--version"])
    shown = capsys.readouterr().out
    assert shown.startswith("appliance ")
    assert f"openvino {metadata.version('openvino')}" in shown
    assert f"openvino-genai {metadata.version('openvino-genai')}" in shown


def test_bad_bench_flags_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--graph", "g.toml", "--concurrency", "1,x"]) == 2
    assert "argument --concurrency: 'x' in '1,x' is not a whole number" in capsys.readouterr().err
    assert main(["bench", "--graph", "g.toml", "--requests", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line, no usage


def test_chat_bench_flags_are_refused_on_an_embedding_graph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "model").mkdir()
    graph = tmp_path / "g.toml"
    graph.write_text('name = "e"\nmodel_path = "model"\npipeline = "TEXT_EMBEDDING"\n')
    assert main(["bench", "--graph", str(graph), "--repeat", "2", "--rate", "1", "--plot", "p.png"]) == 2
    assert "--rate, --plot: not measured for an embedding graph" in capsys.readouterr().err


def test_the_command_line_starts_without_heavy_imports() -> None:
    heavy = ("httpx", "openvino", "openvino_genai", "torch", "litestar", "numpy", "PIL")
    code = "import sys; from appliance.cli import _parser; _parser(); print(sorted({m.split('.')[0] for m in sys.modules}))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert not [name for name in heavy if f"'{name}'" in loaded]


def test_serve_without_a_graphs_directory_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = clean_environment(monkeypatch, tmp_path)
    # Default graphs/ (missing here): exit 2 with one line, no traceback, before OpenVINO loads.
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("appliance: nothing to serve: graphs/ does not exist. ") and err.count("\n") == 1
    assert "`appliance demo .`" in err and "docs/models.md" in err


def test_serve_takes_the_graphs_as_an_argument_and_an_empty_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = clean_environment(monkeypatch, tmp_path)
    served: list[Settings] = []
    monkeypatch.setattr("appliance.server.serve", lambda settings: served.append(settings) or 0)
    empty = tmp_path / "graphs"
    empty.mkdir()
    graph = tmp_path / "one.toml"
    graph.write_text("")
    assert main(["serve", "--config", str(config), str(graph)]) == 0
    assert main(["serve", "--config", str(config), "--graphs", str(empty)]) == 0  # served empty: reload adds
    assert main(["serve", "--config", str(config)]) == 0  # graphs/ exists now
    assert [settings.graphs for settings in served] == [str(graph), str(empty), "graphs"]
    assert main(["serve", "--config", str(config), str(graph), "--graphs", str(empty)]) == 2
    assert "give the graphs once" in capsys.readouterr().err


def _bad_graphs(root: Path) -> Path:
    graphs = root / "graphs"
    graphs.mkdir()
    (graphs / "a.toml").write_text('name = "a"\nmodel_path = "nowhere"\n')
    (graphs / "b.toml").write_text('name = "b"\nmodel_path = "nowhere"\ncolour = 1\n')
    (graphs / "c.toml").write_text("not toml = = \n")
    return graphs


def test_check_reports_every_mistake_and_defaults_like_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = clean_environment(monkeypatch, tmp_path)
    monkeypatch.setattr("appliance.engine.host.devices.available_devices", lambda: ["CPU"])
    _bad_graphs(tmp_path)
    for argv in ([], ["graphs"], ["--graphs", "graphs"]):
        assert main(["check", "--config", str(config), *argv]) == 2
        err = capsys.readouterr().err.splitlines()
        assert [line.split(":")[0] for line in err[:-1]] == [
            f"error  graphs/{name}.toml" for name in "abc"
        ], err  # fmt: skip
        assert "nowhere" in err[0] and "colour" in err[1] and "TOML" in err[2]
        assert err[-1] == "appliance: 3 mistake(s) in the graph files of graphs"
    monkeypatch.setenv("APPLIANCE_GRAPHS", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    assert main(["check", "--config", str(config)]) == 0
    assert "no graph files" in capsys.readouterr().out


def test_config_prints_the_settings_and_where_each_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tomllib

    config = clean_environment(monkeypatch, tmp_path)
    config.write_text('port = 7000\nhost = "10.0.0.1"\nallowed_hosts = ["a"]\n')
    monkeypatch.setenv("APPLIANCE_HOST", "0.0.0.0")
    assert main(["config", "--config", str(config), "--drain-seconds", "5", "one.toml"]) == 0
    out = capsys.readouterr().out
    assert tomllib.loads(out) == {**msgspec.structs.asdict(Settings()), "graphs": "one.toml", "port": 7000,
        "host": "0.0.0.0", "drain_seconds": 5.0, "allowed_hosts": ["a"], **_lists()}  # fmt: skip
    source = {line.split(" = ")[0]: line.split("  # ")[1] for line in out.splitlines() if not line.startswith("#")}
    assert source["graphs"] == "argument GRAPHS" and source["drain_seconds"] == "flag --drain-seconds"
    assert source["host"] == "environment APPLIANCE_HOST" and source["port"] == f"file {config}"
    assert source["max_body_size"] == "default"


def test_config_hides_the_store_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = clean_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("APPLIANCE_STORE_URL", "postgresql://app:s3cret@db:5432/appliance")
    assert main(["config", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert 'store_url = "postgresql://app:***@db:5432/appliance"' in out and "s3cret" not in out


def _lists() -> dict[str, list[str]]:
    """The empty list settings as TOML reads them back (tuples in Settings)."""
    defaults = msgspec.structs.asdict(Settings())
    return {
        name: list(value) for name, value in defaults.items() if isinstance(value, tuple) and name != "allowed_hosts"
    }


def test_an_appliance_variable_naming_no_setting_stops_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = clean_environment(monkeypatch, tmp_path)
    (tmp_path / "graphs").mkdir()
    monkeypatch.setenv("APPLIANCE_PROT", "9000")
    for command in ("serve", "config", "check"):
        assert main([command, "--config", str(config)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("appliance: environment: APPLIANCE_PROT (did you mean APPLIANCE_PORT?): no such setting")


def test_config_shows_the_warning_for_an_open_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tomllib

    config = clean_environment(monkeypatch, tmp_path)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    assert main(["config", "--config", str(config), "--host", "0.0.0.0"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("# WARNING: listening on 0.0.0.0:8000 WITHOUT API KEYS")
    assert tomllib.loads(out)["host"] == "0.0.0.0"  # still a settings file
    (tmp_path / "keys").write_text("k\n")
    for argv in (["--host", "127.0.0.1"], ["--host", "0.0.0.0", "--api-key-file", str(tmp_path / "keys")]):
        assert main(["config", "--config", str(config), *argv]) == 0
        assert "WARNING" not in capsys.readouterr().out
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    (tmp_path / "api-keys").write_text("k\n")
    assert main(["config", "--config", str(config), "--host", "0.0.0.0"]) == 0
    assert "WARNING" not in capsys.readouterr().out


def test_soak_against_no_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A soak pointed at a port nobody listens on ends with exit 2 and one line naming the URL,
    not a traceback (it printed httpx's whole stack before)."""
    import socket

    with socket.socket() as taken:  # bound, never listening: connections to it are refused
        taken.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{taken.getsockname()[1]}"
        assert main(["soak", "--url", url, "--minutes", "0.01"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"appliance soak: cannot reach {url}")
