"""The sidekick factories' contract: the trainer hands them the data's channel mean (viewgrids
built in memory have no GridSpec), a missing one-view run or mean is refused in one line naming
the sidekick, and a sidekick built by hand runs the declared options' defaults."""

from __future__ import annotations

import pytest

from pyskick.errors import UserError
from pyskick.sidekicks import make_sidekick, scoring_inputs
from pyskick.sidekicks.demo import DemoSidekick
from pyskick.sidekicks.reward import RewardSidekick
from pyskick.training.trainer import Trainer, train


@pytest.mark.parametrize("sidekick", ["rew", "demo"])
def test_a_registered_sidekick_trains_on_viewgrids_built_in_memory(
    tmp_path, pretrained, tiny_config, tiny_data, sidekick
):
    assert tiny_data.spec is None
    config = tiny_config.replace(epochs=1, batch_size=8, sidekick=sidekick)
    trainer = Trainer(config, tmp_path / "run", tiny_data, stage="train", init=pretrained)
    result = trainer.fit()
    assert len(result.history) == 1
    assert trainer.sidekick.channel_mean == tiny_data.channel_mean
    assert trainer.sidekick.name == sidekick


@pytest.mark.parametrize("sidekick", ["rew", "demo"])
def test_a_sidekick_without_a_one_view_run_is_refused_in_one_line(
    tmp_path, tiny_config, tiny_data, sidekick
):
    config = tiny_config.replace(epochs=1, sidekick=sidekick)
    with pytest.raises(UserError, match=rf"sidekick '{sidekick}' needs the one-view run") as e:
        train(config, tmp_path / "run", tiny_data)
    assert "\n" not in str(e.value)


def test_a_sidekick_without_a_channel_mean_is_refused_in_one_line(pretrained, tiny_config):
    with pytest.raises(UserError, match="sidekick 'rew' needs the dataset's channel mean"):
        make_sidekick("rew", one_view=pretrained, spec=None, config=tiny_config)
    assert scoring_inputs("x", pretrained, [1, 2.5]) == (pretrained, (1.0, 2.5))


def test_a_sidekick_built_by_hand_runs_the_declared_defaults(pretrained, tiny_config):
    # The declared options for a 1,000-epoch run (the paper's) on a custom grid (no spec).
    paper_run = tiny_config.replace(epochs=1000)
    mean = (120.0,)
    for name, by_hand in [
        ("rew", RewardSidekick(pretrained, channel_mean=mean)),
        ("demo", DemoSidekick(pretrained, channel_mean=mean)),
    ]:
        built = make_sidekick(name, one_view=pretrained, spec=None, config=paper_run,
                              channel_mean=mean)  # fmt: skip
        assert by_hand.options == built.options, name
    rew = RewardSidekick(pretrained, channel_mean=mean)
    assert (rew.k, rew.radius, rew.initial_scale) == (4, 1, 255e-4)
    assert (rew.decay_every, rew.decay_factor) == (500, 2.0)
    assert DemoSidekick(pretrained, channel_mean=mean).hybrid_schedule == 50
