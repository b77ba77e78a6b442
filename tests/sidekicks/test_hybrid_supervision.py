"""HybridSupervision: the T_sup schedule, masks and state any demonstrating sidekick reuses."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from pyskick.sidekicks import HybridSupervision


class Stairs(HybridSupervision):
    """Demonstrates action ``index + t`` at step t (only the schedule is under test)."""

    name = "stairs"

    def trajectories(self, indices: Tensor, starts: Tensor) -> Tensor:
        return indices[None, :] + torch.arange(self.T - 1)[:, None]


def test_t_sup_anneals_from_t_minus_1_to_0_every_schedule_epochs() -> None:
    sidekick = Stairs(hybrid_schedule=2)
    with pytest.raises(RuntimeError, match=r"Stairs.prepare\(\) must run"):
        sidekick.demonstrations(torch.tensor([0]), torch.tensor([0]), 0)
    sidekick.start_schedule(4)
    indices = torch.tensor([5, 7])
    masks = []
    for epoch in range(8):
        demos = sidekick.demonstrations(indices, torch.zeros(2, dtype=torch.int64), epoch)
        if demos is None:
            masks.append(None)
        else:
            actions, mask = demos
            assert torch.equal(actions, torch.tensor([[5, 7], [6, 8], [7, 9]]))
            masks.append(mask[:, 0].tolist())
        sidekick.on_epoch_end(epoch)
    full, two, one = [True] * 3, [True, True, False], [True, False, False]
    assert masks == [full, full, two, two, one, one, None, None]


def test_state_round_trip_and_checks() -> None:
    sidekick = Stairs(hybrid_schedule=1)
    sidekick.start_schedule(4)
    sidekick.on_epoch_end(0)
    resumed = Stairs(hybrid_schedule=1)
    resumed.load_state_dict(sidekick.state_dict())
    resumed.start_schedule(4)  # a restored T_sup is kept
    assert resumed.T_sup == 2
    shorter = Stairs(hybrid_schedule=1)
    shorter.load_state_dict({"T_sup": 2})
    with pytest.raises(ValueError, match="restored T_sup=2 exceeds T - 1 = 1"):
        shorter.start_schedule(2)
    with pytest.raises(ValueError, match="T_sup must be an int >= 0"):
        Stairs().load_state_dict({"T_sup": -1})
    with pytest.raises(ValueError, match="hybrid_schedule must be >= 1"):
        Stairs(hybrid_schedule=0)
    with pytest.raises(TypeError, match="Can't instantiate abstract class"):
        HybridSupervision()  # type: ignore[abstract]
