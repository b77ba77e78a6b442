"""A full-observability critic's view encoding, the same at every glimpse of an episode, is
computed once per rollout (``encode_views``, handed to each call as ``views=``): the values and
gradients are those of encoding the grid at every call, bit for bit with the encoder frozen
(the training stage's), to float rounding for a learning encoder, for a run alone and a pack;
a critic without ``encode_views``, or whose ``forward`` takes no ``views`` (a plugin's, per the
critic contract), is called with the grid alone."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor, nn

from pyskick.envs.rollout import collect_rollout, make_env
from pyskick.models import CompletionPolicy, FullObservabilityCritic, preset
from pyskick.models.packed import PackedFullObservabilityCritic, pack

MEAN = (120.0, 120.0, 120.0)


class GridOnly(nn.Module):
    """A critic as the plugin contract describes it: called with the whole grid, nothing else
    (here the given critic, which then encodes the grid at every call)."""

    full_observability = True

    def __init__(self, critic: nn.Module) -> None:
        super().__init__()
        self.inner = critic

    def forward(self, hidden, proprio, time, grid, *, azimuth=None) -> Tensor:
        return self.inner(hidden, proprio, time, grid, azimuth=azimuth)


def _models(runs: int, frozen: bool):
    torch.manual_seed(0)
    config = preset("cpu-demo")
    policies = [CompletionPolicy(config) for _ in range(runs)]
    critics = [FullObservabilityCritic(config, p.sense_im) for p in policies]
    for critic in critics:  # a critic that has learned: values, and gradients, not all zero
        with torch.no_grad():
            critic.output_layer.weight.normal_(0.0, 0.1)
    if runs == 1:
        policy, critic = policies[0], critics[0]
    else:
        policy = pack(policies)
        critic = pack(critics, image_encoder=policy.sense_im)
        assert isinstance(critic, PackedFullObservabilityCritic)
    if frozen:  # the training stage's: the critic's gradients stop at the encoder
        policy.freeze_sense_and_fuse()
    return policy.train(), critic.train()


def _rollout(policy, critic, grids):
    return collect_rollout(
        policy,
        make_env(policy.config, 4, MEAN),
        grids,
        mode="sample",
        generator=torch.Generator().manual_seed(3),
        critic=critic,
        critic_full_obs=True,
    )


@pytest.mark.parametrize("runs", [1, 3], ids=["alone", "pack"])
@pytest.mark.parametrize("frozen", [True, False], ids=["frozen-encoder", "learning-encoder"])
def test_a_rollout_encodes_the_grids_views_once(runs, frozen):
    policy, critic = _models(runs, frozen)
    config = policy.config
    shape = (config.n_elevations, config.n_azimuths, config.channels, 32, 32)
    grids = torch.randint(0, 256, (4 * runs, *shape), dtype=torch.uint8)
    results = []
    for wrap in (GridOnly, lambda c: c):
        p = copy.deepcopy(policy)
        c = copy.deepcopy(critic)
        object.__setattr__(c, "image_encoder", p.sense_im)  # the copy's own, as set up
        calls: list[int] = []

        def count(module, inputs, output, calls=calls):
            calls.append(inputs[0].shape[0])

        hook = p.sense_im.register_forward_hook(count)
        rollout = _rollout(p, wrap(c), grids)
        hook.remove()
        (rollout.values.square().sum() + rollout.log_probs.sum()).backward()
        results.append((rollout, p, c, calls))
    (every, p1, c1, calls1), (once, p2, c2, calls2) = results
    views = 4 * runs * config.n_views
    # Grid encodings: one per critic call (3, T - 1) against one per rollout; the glimpses'
    # own views (4 per episode) are the policy's.
    assert calls1.count(views // runs) == 3
    assert calls2.count(views // runs) == 1
    assert torch.equal(every.values, once.values)
    assert torch.equal(every.actions, once.actions)
    named = [*p1.named_parameters(), *c1.named_parameters()]
    other = dict([*p2.named_parameters(), *c2.named_parameters()])
    for name, param in named:
        got = other[name].grad
        assert (param.grad is None) == (got is None), name
        if param.grad is None:
            continue
        if frozen or not name.startswith("sense_im"):
            assert torch.equal(got, param.grad), name  # the same operations, in the same order
        else:  # the encoder's gradient: the three calls' contributions summed before, not after
            scale = float(param.grad.abs().max())
            torch.testing.assert_close(got, param.grad, rtol=1e-4, atol=1e-4 * scale)


class OldSignature(FullObservabilityCritic):
    """A plugin's subclass written against the contract before ``views``: its ``forward``
    takes the grid alone (and inherits ``encode_views``)."""

    def forward(self, hidden, proprio, time, grid, *, azimuth=None) -> Tensor:
        return super().forward(hidden, proprio, time, grid, azimuth=azimuth)


def test_a_critic_whose_forward_takes_no_views_is_called_with_the_grid():
    policy, _ = _models(1, True)
    critic = OldSignature(policy.config, policy.sense_im).train()
    config = policy.config
    shape = (config.n_elevations, config.n_azimuths, config.channels, 32, 32)
    grids = torch.randint(0, 256, (4, *shape), dtype=torch.uint8)
    calls: list[int] = []
    policy.sense_im.register_forward_hook(lambda m, i, o: calls.append(i[0].shape[0]))
    rollout = _rollout(policy, critic, grids)
    assert rollout.values.shape == (3, 4)
    assert calls.count(4 * config.n_views) == 3  # the grid encoded at each call, as before
    # T = 1: no critic call, no encoding.
    calls.clear()
    collect_rollout(
        policy, make_env(config, 1, MEAN), grids, mode="sample", critic=FullObservabilityCritic(
            config, policy.sense_im), critic_full_obs=True,
    )  # fmt: skip
    assert calls == [4]


def test_a_critic_call_refuses_views_of_another_shape():
    _, critic = _models(1, True)
    config = critic.config
    grid = torch.zeros(2, *config.grid_shape)
    hidden, proprio = torch.zeros(2, config.hidden_size), torch.zeros(2, config.proprio_size)
    views = critic.encode_views(grid)
    assert views.shape == (2, config.n_views, config.sense_size)
    critic.eval()
    torch.testing.assert_close(
        critic(hidden, proprio, 1, grid, azimuth=torch.zeros(2), views=views),
        critic(hidden, proprio, 1, grid, azimuth=torch.zeros(2)),
        rtol=0,
        atol=0,
    )
    with pytest.raises(ValueError, match="views"):
        critic(hidden, proprio, 1, grid, azimuth=torch.zeros(2), views=views[:, :-1])
    with pytest.raises(ValueError, match="grid"):
        critic(hidden, proprio, 1, grid[:1], azimuth=torch.zeros(2), views=views)
    # A pack's: [R, B * V, sense_size].
    _, packed = _models(2, True)
    grid = torch.zeros(4, *config.grid_shape)
    hidden, proprio = torch.zeros(4, config.hidden_size), torch.zeros(4, config.proprio_size)
    views = packed.encode_views(grid)
    assert views.shape == (2, 2 * config.n_views, config.sense_size)
    with pytest.raises(ValueError, match="views"):
        packed(hidden, proprio, 1, grid, azimuth=torch.zeros(4), views=views[:1])
