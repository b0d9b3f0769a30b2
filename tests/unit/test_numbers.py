"""Non-finite and absurd numbers (issue 49, L2): every numeric flag of every subcommand, every
setting (flag, environment variable, settings file) and every number of a graph file refuses
`nan`, `inf`, `-inf`, `1e400` and a 401-digit integer with exit 2 and a one-line message (or, for
a graph file, an error naming the file and the field), never a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from msgspec import inspect

from appliance.cli import _parser, main
from appliance.commands.numbers import Number, Numbers
from appliance.errors import ConfigError
from appliance.graphfiles import Graph, load_graph
from appliance.settings import Settings
from tests.settings_env import clean_environment

DIGITS = "9" * 401
BAD = ("nan", "inf", "-inf", "1e400", DIGITS, f"-{DIGITS}")


def _numeric_fields(struct: type, prefix: str = "") -> Iterator[tuple[str, inspect.Type]]:
    """(dotted path, int or float type) of every number `struct` holds, nested structs, dict
    values (`{}`) and list items (`[]`) included."""

    def walk(kind: inspect.Type, path: str, seen: set[type]) -> Iterator[tuple[str, inspect.Type]]:
        if isinstance(kind, inspect.Metadata):
            kind = kind.type
        if isinstance(kind, inspect.IntType | inspect.FloatType):
            yield path, kind
        elif isinstance(kind, inspect.StructType) and kind.cls not in seen:
            for field in kind.fields:
                yield from walk(field.type, f"{path}.{field.encode_name}".lstrip("."), seen | {kind.cls})
        elif isinstance(kind, inspect.UnionType):
            for member in kind.types:
                yield from walk(member, path, seen)
        elif isinstance(kind, inspect.ListType | inspect.TupleType | inspect.VarTupleType | inspect.SetType):
            yield from walk(kind.item_type, f"{path}[]", seen)
        elif isinstance(kind, inspect.DictType):
            yield from walk(kind.value_type, f"{path}{{}}", seen)

    yield from walk(inspect.type_info(struct), prefix, set())


@pytest.mark.parametrize("struct", [Settings, Graph])
def test_every_number_of_the_settings_and_graph_files_has_both_bounds(struct: type) -> None:
    fields = list(_numeric_fields(struct))
    assert len(fields) > 10
    unbounded = [
        path for path, kind in fields if (kind.ge is None and kind.gt is None) or (kind.le is None and kind.lt is None)
    ]
    assert unbounded == []


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _numeric_flags() -> list[tuple[str, str]]:
    return [
        (name, action.option_strings[0])
        for name, parser in _subparsers().items()
        for action in parser._actions
        if isinstance(action.type, Number | Numbers)
    ]


def test_no_flag_reads_a_bare_int_or_float() -> None:
    bare = [
        f"{name} {action.option_strings or action.dest}"
        for name, parser in _subparsers().items()
        for action in parser._actions
        if action.type in (int, float)
    ]
    assert bare == [], "read numbers with appliance.commands.numbers.Number (bounded, finite)"
    subcommands = {name for name, _ in _numeric_flags()}
    assert {"serve", "config", "models", "bench", "soak", "tune", "export"} <= subcommands


@pytest.mark.parametrize(("subcommand", "flag"), _numeric_flags())
def test_every_numeric_flag_refuses_non_finite_and_absurd_values(
    subcommand: str, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for value in (*BAD, f"1,{BAD[0]}"):
        assert main([subcommand, f"{flag}={value}"]) == 2, value
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert f"argument {flag}" in err and "is not" in err and len(err) < 300, err


@pytest.mark.parametrize("field", [path for path, _ in _numeric_fields(Settings)])
def test_every_numeric_setting_refuses_them_from_the_environment_and_the_file(
    field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = clean_environment(monkeypatch, tmp_path)
    for value in BAD:
        with monkeypatch.context() as env:
            env.setenv(f"APPLIANCE_{field.upper()}", value)
            assert main(["config", "--config", str(config)]) == 2, value
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and field in err and "Traceback" not in err, err
    for value in ("nan", "inf", "-inf", "1e400", DIGITS):  # TOML: 1e400 reads as inf
        config.write_text(f"{field} = {value}\n")
        assert main(["config", "--config", str(config)]) == 2, value
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and field in err, err


@pytest.mark.parametrize("subcommand", ["config", "check", "serve"])
@pytest.mark.parametrize("budget", [DIGITS, f"{DIGITS}GiB", f"{DIGITS}%", "nan", "inf", "1e400", "2000000TiB"])
def test_a_memory_budget_beyond_any_machine_is_one_line(
    subcommand: str, budget: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once an OverflowError traceback from `config`, `check` and `serve` for 401 digits."""
    config = clean_environment(monkeypatch, tmp_path)
    config.write_text(f'memory_budget = "{budget}"\n')
    (tmp_path / "graphs").mkdir()
    monkeypatch.setattr("appliance.engine.host.devices.available_devices", lambda: ["CPU"])
    assert main([subcommand, "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "memory_budget" in err and len(err) < 300, err


def _graph_text(path: str, value: str) -> str:
    """A graph file setting `path` (`limits.max_messages`, `plugin_config{}`) to `value`."""
    if path.endswith("{}"):
        section, key = path[:-2], "NUM_STREAMS"
    elif path.endswith("[]"):
        *sections, key = path[:-2].split(".")
        section, value = ".".join(sections), f"[{value}]"
    else:
        *sections, key = path.split(".")
        section = ".".join(sections)
    return 'name = "m"\nmodel_path = "model"\n' + (f"[{section}]\n" if section else "") + f"{key} = {value}\n"


@pytest.mark.parametrize("field", sorted({path for path, _ in _numeric_fields(Graph)}))
def test_every_number_of_a_graph_file_refuses_them_naming_the_field(field: str, tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    path = tmp_path / "g.toml"
    for value in ("nan", "inf", "-inf", DIGITS, f"-{DIGITS}"):
        path.write_text(_graph_text(field, value))
        with pytest.raises(ConfigError) as refused:
            load_graph(path)
        message = str(refused.value)
        assert str(path) in message and field.rstrip("{}[]").split(".")[-1] in message, (value, message)


def test_plugin_config_takes_finite_numbers() -> None:
    config = msgspec.convert({"name": "m", "model_path": "model", "plugin_config": {"A": 4, "B": 0.5}}, Graph)
    assert config.plugin_config == {"A": 4, "B": 0.5}
