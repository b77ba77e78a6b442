"""What ``device="auto"`` means: CUDA when there is one, unless ``$PYSKICK_AUTO_DEVICE`` says;
the test kit keeps it on the CPU for the session (docs/training.md, "Configuration")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from pyskick import testing
from pyskick.distributed import AUTO_DEVICE_ENV, resolve_device
from pyskick.errors import UserError


def test_the_variable_decides_what_auto_means(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AUTO_DEVICE_ENV, "cpu")
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setenv(AUTO_DEVICE_ENV, "cuda")
    assert resolve_device("cpu") == torch.device("cpu")  # explicit settings are not affected
    if torch.cuda.is_available():
        assert resolve_device("auto", 0) == torch.device("cuda", 0)
    else:
        with pytest.raises(UserError, match=r"^PYSKICK_AUTO_DEVICE=cuda requested but no CUDA"):
            resolve_device("auto")
    monkeypatch.setenv(AUTO_DEVICE_ENV, "gpu")
    with pytest.raises(UserError, match=r"^PYSKICK_AUTO_DEVICE must be cpu or cuda, got 'gpu'"):
        resolve_device("auto")
    monkeypatch.setenv(AUTO_DEVICE_ENV, "")  # empty: as unset
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected


@pytest.mark.skipif(
    bool(testing._auto_device_before)
    and testing._auto_device_before[0] not in (None, "", "cpu"),  # "cpu": an xdist worker's
    reason="PYSKICK_AUTO_DEVICE was set to another device by the caller of this session",
)
def test_the_kit_keeps_auto_on_the_cpu_for_the_session() -> None:
    # Set when the session started (pytest_configure), before any fixture or subprocess.
    assert testing.AUTO_DEVICE_ENV == AUTO_DEVICE_ENV
    assert os.environ[AUTO_DEVICE_ENV] == "cpu"
    assert resolve_device("auto") == torch.device("cpu")


@pytest.mark.parametrize("before", [None, "", "cuda"])
def test_the_kit_sets_the_variable_only_when_unset_and_restores_it(
    monkeypatch: pytest.MonkeyPatch, before: str | None
) -> None:
    config = SimpleNamespace(addinivalue_line=lambda *args: None)
    if before is None:
        monkeypatch.delenv(AUTO_DEVICE_ENV, raising=False)
    else:
        monkeypatch.setenv(AUTO_DEVICE_ENV, before)
    testing.pytest_configure(config)  # type: ignore[arg-type]
    assert os.environ[AUTO_DEVICE_ENV] == (before or "cpu")  # empty counts as unset
    testing.pytest_unconfigure(config)  # type: ignore[arg-type]
    assert os.environ.get(AUTO_DEVICE_ENV) == before


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_preset_run_trains_on_the_gpu_when_auto_is_left_to_the_machine(
    tmp_path: Path,
    tiny_scenes: Path,
    tiny_one_view: Path,
    cli_runner: testing.CliRunner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(AUTO_DEVICE_ENV)
    code, _, err = cli_runner(
        "train", "--dataset", tiny_scenes, "--init", tiny_one_view, "--preset", "cpu-demo",
        "--batch-size", "8", "--epochs", "1", "--out", tmp_path / "run",
    )  # fmt: skip
    assert code == 0, err
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["device"] == "auto"
    assert config["device_used"].startswith("cuda")  # "cuda:0"


def test_a_rank_without_a_gpu_of_its_own_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # torchrun --nproc-per-node 2 on a one-GPU machine: rank 1 asks for cuda:1. CUDA is faked:
    # the refusal comes before any CUDA call.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(UserError, match=r"^cuda:1 requested but 1 CUDA device\(s\) visible: "):
        resolve_device("cuda")
    with pytest.raises(UserError, match=r"^cuda:2 requested"):
        resolve_device("cuda", 2)
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert resolve_device("cuda") == torch.device("cuda", 0)
