"""README, "From Python": bad input to the library raises ``pyskick.errors.UserError`` (a
ValueError; ``UserTypeError`` is also a TypeError), the one exception a caller catches for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from pyskick import ops
from pyskick.actors import make_actor
from pyskick.envs import LookAroundEnv
from pyskick.errors import UserError, UserTypeError
from pyskick.metrics import get_metric
from pyskick.testing import tiny_train_config
from pyskick.training import TrainData
from pyskick.training.trainer import Trainer

GRIDS = torch.zeros(4, 2, 3, 1, 8, 8, dtype=torch.uint8)

CASES: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "an unknown metric": (lambda: get_metric("foo"), UserError, "metric must be one of"),
    "float grids": (
        lambda: TrainData(GRIDS.float(), GRIDS, (0.0,)),
        UserTypeError,
        "train grids must be uint8",
    ),
    "square views": (
        lambda: TrainData(GRIDS[..., :4], GRIDS[..., :4], (0.0,)),
        UserError,
        "views must be square",
    ),
    "no glimpse": (lambda: LookAroundEnv(T=0), UserError, "T must be >= 1"),
    "a data file where TrainData goes": (
        lambda: Trainer(tiny_train_config(), "r", "scenes.h5", stage="train"),  # type: ignore[arg-type]
        UserTypeError,
        "data must be a TrainData",
    ),
    "an unknown backend": (
        lambda: ops.nms_rewards(torch.zeros(1, 2, 3), 1, 1, backend="nope"),  # type: ignore[arg-type]
        UserError,
        "backend must be one of",
    ),
    "a channel mean out of range": (
        lambda: LookAroundEnv(channel_mean=[300.0]),
        UserError,
        "channel_mean must lie in",
    ),
    "NaN scores, found by the native kernel": (
        lambda: ops.nms_rewards(torch.full((1, 2, 3), float("nan")), 1, 1),
        UserError,
        "scores contains NaN",
    ),
    "demo-actions without a one-view run": (
        lambda: make_actor("demo-actions", one_view=None, spec=None),
        UserError,
        "actor demo-actions needs the one-view run",
    ),
    "a wrong shape": (
        lambda: ops.rotate_viewgrid(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long)),
        UserError,
        "must have",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_raises_user_error(name: str) -> None:
    call, kind, message = CASES[name]
    with pytest.raises(kind, match=message) as raised:
        call()
    assert isinstance(raised.value, UserError)
    assert "\n" not in str(raised.value)
