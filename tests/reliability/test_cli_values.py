"""Bad ``--config`` files and bad CLI values are refused cleanly (issue 14, F5 and corpus).

Every refusal: exit 2, one line naming the file or value, no traceback, nothing on disk changed
(the ``refuse`` fixture of ``conftest.py``). A config file that cannot be read, is not UTF-8
text, is not TOML, or holds an unknown key or a bad value is named in the message.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from pyskick.config import MAX_CONFIG_BYTES, config_preset
from pyskick.data.builtin import make_builtin
from pyskick.training import load_config

from .conftest import Refuse

# name -> (file contents, needles of the error line besides the file's path)
BAD_CONFIGS: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "binary": (bytes([0x84, 0x00, 0xFF, 0x10]) * 64, ("not a UTF-8 text file", "0x84")),
    "latin-1": ("lr = 0.1 # café\n".encode("latin-1"), ("not a UTF-8 text file", "offset 14")),
    "nul-bytes": (b"\x00" * 100, ("not valid TOML",)),
    "bad-syntax": (b"epochs = [\n", ("not valid TOML",)),
    "duplicate-key": (b"epochs = 1\nepochs = 2\n", ("not valid TOML",)),
    "unknown-key": (b"bogus = 1\n", ("unknown keys bogus",)),
    "string-for-float": (b'lr = "x"\n', ("TrainConfig.lr must be a number",)),
    "bool-for-int": (b"T = true\n", ("TrainConfig.T must be an int",)),
    "date-for-int": (b"T = 2020-01-01\n", ("TrainConfig.T must be an int",)),
    "negative-lr": (b"lr = -1\n", ("TrainConfig.lr must be positive",)),
    "nan-lr": (b"lr = nan\n", ("TrainConfig.lr must be finite",)),
    "unknown-preset": (b'preset = "nope"\n', ("unknown training preset 'nope'",)),
    "preset-not-string": (b"preset = 3\n", ("preset must be a string",)),
    "nested-table": (b"[model]\nwidth = 3\n", ("must be flat", "model")),
    "sidekick-options-key": (b"sidekick_options = 3\n", ("[sidekick] table",)),
    "sidekick-name-not-string": (b"[sidekick]\nname = 3\n", ("sidekick must be a registered",)),
    "too-large": (b"#" * (MAX_CONFIG_BYTES + 1), ("too large",)),
    # Issue 25, item 13: a [sidekick] table's values follow the option's declared type (TOML
    # is typed: "3" is a string), and its errors name the file, not --sidekick-option.
    "sidekick-string-for-int": (
        b'[sidekick]\nname = "rew"\ndecay_every = "3"\n',
        ("[sidekick] table: sidekick 'rew' option decay_every must be an int >= 1, got '3'",),
    ),
    "sidekick-float-for-int": (
        b'[sidekick]\nname = "rew"\ndecay_every = 3.0\n',
        ("[sidekick] table: sidekick 'rew' option decay_every must be an int >= 1, got 3.0",),
    ),
    "sidekick-bool-for-int": (
        b'[sidekick]\nname = "demo"\nhybrid_schedule = true\n',
        ("sidekick 'demo' option hybrid_schedule must be an int >= 1, got True",),
    ),
    "sidekick-unknown-option": (
        b'[sidekick]\nname = "rew"\nnope = 3\n',
        ("[sidekick] table: sidekick 'rew' has no option 'nope'; valid options: scale",),
    ),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real viewgrid file (read only)."""
    return make_builtin("synthetic-scenes", tmp_path_factory.mktemp("data") / "s.h5", 40, 1)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder (also the cache) that a refusal must leave empty."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(folder / "cache"))
    return folder


def _config_file(root: Path, name: str) -> Path:
    path = root / f"{name}.toml"
    path.write_bytes(BAD_CONFIGS[name][0])
    return path


@pytest.mark.parametrize("name", BAD_CONFIGS)
def test_train_refuses_a_bad_config_file(
    refuse: Refuse, dataset: Path, work: Path, tmp_path: Path, name: str
) -> None:
    config = _config_file(tmp_path, name)
    args = ["train", "--dataset", dataset, "--config", config, "--out", work / "run"]
    refuse(args, 2, "config file", str(config), *BAD_CONFIGS[name][1], watch=[work, config])


@pytest.mark.parametrize("name", [n for n in BAD_CONFIGS if n.startswith("sidekick-")])
def test_a_sidekick_table_error_blames_the_file_not_the_command_line(
    refuse: Refuse, dataset: Path, work: Path, tmp_path: Path, name: str
) -> None:
    config = _config_file(tmp_path, name)
    for command in (
        ["train", "--dataset", dataset, "--config", config, "--out", work / "run"],
        ["score", "--dataset", dataset, "--config", config, "--out", work / "s.h5"],
    ):
        line = refuse(command, 2, str(config), watch=[work, config])
        assert "--sidekick-option" not in line


def test_a_typed_sidekick_table_and_command_line_strings_are_both_taken(tmp_path: Path) -> None:
    from pyskick_cli.shared_options import resolve_sidekick

    config_path = tmp_path / "rew.toml"
    # An int where a number is declared is a number; the command line's strings are parsed.
    config_path.write_text('[sidekick]\nname = "rew"\nscale = 1\ndecay_every = 3\n')
    config = load_config(config_path, overrides={"sidekick_options": {"k": "2"}})
    options = resolve_sidekick(config, None, given_name=True, config_path=config_path).options
    assert (options["scale"], options["decay_every"], options["k"]) == (1.0, 3, 2)
    assert isinstance(options["scale"], float)


COMMANDS: dict[str, Callable[[Path, Path], list[object]]] = {
    "pretrain": lambda data, work: ["pretrain", "--dataset", data, "--out", work / "one"],
    "score": lambda data, work: [
        "score",
        "--sidekick",
        "rew",
        "--dataset",
        data,
        "--out",
        work / "s.h5",
    ],
    "reproduce": lambda data, work: ["reproduce", "--dataset", data, "--out", work / "rep"],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", ["binary", "string-for-float"])
def test_every_command_with_config_names_the_file(
    refuse: Refuse, dataset: Path, work: Path, tmp_path: Path, command: str, name: str
) -> None:
    config = _config_file(tmp_path, name)
    args = [*COMMANDS[command](dataset, work), "--config", config]
    refuse(args, 2, "config file", str(config), *BAD_CONFIGS[name][1], watch=[work, config])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_config_that_is_a_pipe_is_refused_not_read(
    refuse: Refuse, dataset: Path, work: Path, tmp_path: Path
) -> None:
    # Reading a FIFO with no writer would block for ever.
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    args = ["train", "--dataset", dataset, "--config", fifo, "--out", work / "run"]
    refuse(args, 2, str(fifo), "not a regular file", watch=[work])


@pytest.mark.skipif(not Path("/proc/self/mem").is_file(), reason="needs Linux /proc")
def test_config_that_cannot_be_read(refuse: Refuse, dataset: Path, work: Path) -> None:
    # A regular file whose read fails (EIO), even for root, unlike a chmod 000 file.
    args = ["train", "--dataset", dataset, "--config", "/proc/self/mem", "--out", work / "run"]
    refuse(args, 2, "config file /proc/self/mem cannot be read", watch=[work])


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: None, "does not exist"),
    ],
    ids=["directory", "missing"],
)
def test_config_path_that_is_no_file(
    refuse: Refuse, dataset: Path, work: Path, tmp_path: Path, make: Callable, needle: str
) -> None:
    config = tmp_path / "config.toml"
    make(config)
    args = ["train", "--dataset", dataset, "--config", config, "--out", work / "run"]
    refuse(args, 2, "--config", str(config), needle, watch=[work, tmp_path])


def test_config_errors_name_the_file_in_the_library(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"preset = 7\n")
    with pytest.raises(TypeError, match=f"^config file {bad}: preset must be a string"):
        config_preset(bad)
    with pytest.raises(TypeError, match=f"^config file {bad}: preset must be a string"):
        load_config(bad)
    # A bad command-line value is the command line's fault: the file is not blamed.
    good = tmp_path / "good.toml"
    good.write_bytes(b"epochs = 2\n")
    with pytest.raises(ValueError, match=r"^TrainConfig\.lr must be positive"):
        load_config(good, overrides={"lr": -1.0})
    # Values that are fine each alone but contradict each other: both are named.
    deterministic = tmp_path / "deterministic.toml"
    deterministic.write_bytes(b"deterministic = true\n")
    both = f"^config file {deterministic} and the command line's options together: TrainConfig"
    with pytest.raises(ValueError, match=both):
        load_config(deterministic, overrides={"cudnn_benchmark": True})
    # In the file alone, the file is named alone.
    deterministic.write_bytes(b"deterministic = true\ncudnn_benchmark = true\n")
    with pytest.raises(ValueError, match=f"^config file {deterministic}: TrainConfig"):
        load_config(deterministic, overrides={"epochs": 3})


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    # Some editors start UTF-8 files with a BOM; TOML readers accept it.
    config = tmp_path / "bom.toml"
    config.write_bytes(b"\xef\xbb\xbfepochs = 7\n")
    assert load_config(config, preset="cpu-demo").epochs == 7


NO_GPU = not torch.cuda.is_available()


# Other commands' bad values: (args with {work} and {data} placeholders, needles).
OTHER_VALUES: list[tuple[list[str], tuple[str, ...]]] = [
    (["compare", "{work}/a", "{work}/b"], ("{work}/a", "no such evaluation file")),
    (["compare", "{data}", "{data}"], ("{data}", "not a readable evaluation file")),
    (["compare", "{work}", "{work}"], ("{work}", "has no avg evaluation")),
    (["compare", "{work}", "{work}", "--metric", "best"], ("--metric", "'best'")),
    (["bench", "--quick", "--ops", "rotate,nms"], ("--ops", "'rotate,nms'")),
    (["bench", "--quick", "--ops", ","], ("--ops", "','")),
    (["bench", "--quick", "--repeats", "0"], ("--repeats", "0 is not in the range 1<=x<=10000")),
    (["bench", "--quick", "--device", "tpu"], ("--device", "'tpu'")),
    (["visualize", "{work}", "--out", "{work}/v", "--examples", "0"], ("--examples", "0")),
    (["visualize", "{work}", "--out", "{data}"], ("--out", "{data}", "is a file")),
    (["visualize", "{work}", "--out", "{work}/v"], ("{work}", "does not record its dataset")),
    (
        ["reproduce", "--dataset", "{data}", "--out", "{work}/r", "--methods", "nope"],
        ("unknown method 'nope'",),
    ),
    (
        ["reproduce", "--dataset", "{data}", "--out", "{work}/r", "--methods", ","],
        ("--methods", "no method"),
    ),
    (
        ["reproduce", "--dataset", "{data}", "--out", "{work}/r", "--sidekick-option", "decay"],
        ("--sidekick-option", "KEY=VALUE", "'decay'"),
    ),
    (
        ["reproduce", "--dataset", "{work}/none.h5", "--out", "{work}/r"],
        ("--dataset", "{work}/none.h5", "does not exist"),
    ),
    (["demo", "--out", "{work}/d", "--num", "5"], ("--num", "5")),
    (["demo", "--out", "{work}/d", "--methods", "nope"], ("unknown method 'nope'",)),
    (["info", "--verbose"], ("--verbose",)),
    (["plugins", "--json", "extra"], ("extra",)),
]
if NO_GPU:
    OTHER_VALUES.append(
        (["bench", "--quick", "--device", "cuda"], ("--device cuda", "no GPU is visible"))
    )


@pytest.mark.parametrize(
    ("args", "needles"), OTHER_VALUES, ids=[" ".join(a[:1] + a[-2:]) for a, _ in OTHER_VALUES]
)
def test_other_commands_refuse_bad_values(
    refuse: Refuse, dataset: Path, work: Path, args: list[str], needles: tuple[str, ...]
) -> None:
    def fill(text: str) -> str:
        return text.format(work=work, data=dataset)

    refuse([fill(a) for a in args], 2, *map(fill, needles), watch=[work, dataset])
