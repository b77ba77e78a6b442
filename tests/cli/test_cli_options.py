"""One meaning per option name across every command; registered names checked by one type."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from pyskick.plugins import get_registries
from pyskick_cli.main import cli, main
from pyskick_cli.param_types import EvalBatchSize, RegisteredName


def _commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from _commands(command, f"{path} ")
        else:
            yield path, command


def _options() -> dict[str, list[tuple[str, click.Option]]]:
    """Option spelling (each of its names) -> [(command, option)] over every command."""
    found: dict[str, list[tuple[str, click.Option]]] = {}
    for path, command in _commands(cli):
        for param in command.params:
            if isinstance(param, click.Option):
                for spelling in param.opts:
                    found.setdefault(spelling, []).append((path, param))
    return found


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0), capsys.readouterr().err


# What each shared option is, wherever it appears: (type class, flag, repeatable).
SHARED = {
    "--dataset": (click.types.StringParamType, False, False),
    "--preset": (click.Choice, False, False),
    "--config": (click.Path, False, False),
    "--seed": (click.IntRange, False, False),
    "--epochs": (click.IntRange, False, False),
    "--batch-size": (click.IntRange, False, False),
    "--eval-batch-size": (EvalBatchSize, False, False),
    "--data-on-device": (click.Choice, False, False),
    "--save-every": (click.IntRange, False, False),
    "--glimpses": (click.IntRange, False, False),
    "--split": (click.types.StringParamType, False, False),
    "--one-view": (click.Path, False, False),
    "--sidekick": (RegisteredName, False, False),
    "--critic": (RegisteredName, False, False),
    "--actor": (RegisteredName, False, False),
    "--sidekick-option": (click.types.StringParamType, False, True),
    "--json": (click.types.BoolParamType, True, False),
    "--overwrite": (click.types.BoolParamType, True, False),
}


@pytest.mark.parametrize("spelling", list(SHARED))
def test_a_shared_option_means_the_same_everywhere(spelling: str) -> None:
    kind, flag, multiple = SHARED[spelling]
    uses = _options()[spelling]
    assert uses, spelling
    for path, option in uses:
        assert isinstance(option.type, kind), (path, spelling, option.type)
        assert option.is_flag == flag, (path, spelling)
        assert option.multiple == multiple, (path, spelling)


def test_device_is_one_choice_outside_bench() -> None:
    # bench also times "all" devices; every other command runs on one of the same three.
    for path, option in _options()["--device"]:
        if path != "bench":
            assert isinstance(option.type, click.Choice), path
            assert tuple(option.type.choices) == ("auto", "cpu", "cuda"), path


def test_each_meaning_has_its_own_name() -> None:
    options = _options()
    owners = {name: {path for path, _ in options.get(name, [])} for name in options}
    # The training batch and the episodes per forward pass of evaluation are two options.
    assert owners["--batch-size"] == {"pretrain", "train", "reproduce", "demo"}
    assert owners["--eval-batch-size"] == {"evaluate", "score", "pretrain", "train"}
    # A split's name, and a converter's train,val,test fractions.
    assert owners["--split"] == {"evaluate", "visualize", "data preview"}
    assert owners["--split-fractions"] == {"data from-panoramas", "data from-meshes"}
    # Glimpses per episode: -T or --glimpses, on the commands that take a glimpse budget.
    assert owners["-T"] == owners["--glimpses"] == {"train", "score"}
    assert "--T" not in options


@pytest.mark.parametrize(
    ("args", "removed"),
    [
        (["train", "--T", "3", "--out", "x"], "--T"),
        (["score", "--sidekick", "rew", "--T", "3", "--out", "x.h5"], "--T"),
        (["evaluate", ".", "--batch-size", "8"], "--batch-size"),
        (["score", "--sidekick", "rew", "--batch-size", "8", "--out", "x.h5"], "--batch-size"),
        (["data", "from-panoramas", ".", "--out", "x.h5", "--split", "1,1,1"], "--split"),
        (["data", "from-meshes", ".", "--out", "x.h5", "--split", "1,1,1"], "--split"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else a,
)
def test_old_spellings_are_refused(
    args: list[str],
    removed: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = _run(args, capsys)
    assert code == 2
    assert err.startswith("Error: No such option"), err
    assert removed in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["train", "--critic", "nope", "--out", "x"], "critic"),
        (["train", "--actor", "nope", "--out", "x"], "actor"),
        (["train", "--sidekick", "nope", "--out", "x"], "sidekick"),
        (["evaluate", ".", "--actor", "nope"], "actor"),
        (["score", "--sidekick", "nope", "--out", "x.h5"], "sidekick"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else a,
)
def test_an_unknown_registered_name_lists_the_valid_ones(
    args: list[str],
    kind: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = _run(args, capsys)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    names = get_registries()[kind].names()
    assert f"unknown {kind} 'nope'; valid names: {', '.join(names)}" in lines[0]
    assert f"--{kind}" in lines[0]
    assert list(tmp_path.iterdir()) == []  # refused while parsing, before any work


def test_help_lists_the_registered_names() -> None:
    result = CliRunner().invoke(cli, ["train", "--help"])
    assert result.exit_code == 0
    for kind in ("critic", "actor", "sidekick"):
        names = get_registries()[kind].names()
        assert f"--{kind} [{'|'.join(names)}]" in " ".join(result.output.split())


def test_registered_name_keeps_the_value_and_completes() -> None:
    kind = RegisteredName("critic")
    assert kind.convert("average", None, None) == "average"
    with pytest.raises(click.BadParameter, match="unknown critic 'x'"):
        kind.convert("x", None, None)
    ctx = click.Context(cli)
    option = click.Option(["--critic"], type=kind)
    assert [item.value for item in kind.shell_complete(ctx, option, "a")] == [
        name for name in get_registries()["critic"].names() if name.startswith("a")
    ]


@pytest.mark.parametrize(
    ("value", "expected"), [("auto", "auto"), ("64", 64), (8, 8), ("0", None), ("x", None)]
)
def test_eval_batch_size_is_a_positive_int_or_auto(value: object, expected: object) -> None:
    kind = EvalBatchSize()
    if expected is None:
        with pytest.raises(click.BadParameter, match="positive integer"):
            kind.convert(value, None, None)
    else:
        assert kind.convert(value, None, None) == expected


@pytest.mark.parametrize(
    ("args", "missing"),
    [
        (["reproduce", "--out", "x"], "--dataset"),
        (["reproduce", "--dataset", "synthetic-scenes"], "--out"),
        (["pool", "a", "b"], "--out"),
        (["plan", "a"], "--out"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else a,
)
def test_a_required_option_left_out_is_named(
    args: list[str],
    missing: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Click 8.3+ takes an explicit default=None as a value: a shared option made required
    # must drop its default, or the command gets None and fails inside (exit 1).
    monkeypatch.chdir(tmp_path)
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    code, err = _run(args, capsys)
    assert code == 2
    assert f"Error: Missing option '{missing}'" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
