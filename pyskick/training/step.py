"""One training step: a batch of episodes, its loss, one optimiser update (docs/training.md,
"The training step").

:func:`train_step` is the body of an epoch's loop. It never waits for the device: everything
it reads is already there (the batch, the sidekick's scores, the baseline's sums), what it
produces stays there (:class:`StepMetrics` are 0-d device tensors, read once per epoch), and the
values it is given are trusted (starts drawn in range, scores checked when loaded), so that on a
GPU the host queues step after step while the device computes.
``pyskick.training.syncs.no_host_syncs`` checks this in the test suite.

The one exception is the first batch of a critic of returns (``critic_residual = false``),
which reads its mean return to calibrate the critic (:meth:`StepRunner.calibrate_critic`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

import torch
from torch import Tensor, nn

from pyskick.actors.base import forced_demonstrations
from pyskick.distributed import DistContext, all_reduce_sum
from pyskick.envs.rollout import Rollout, collect_rollout
from pyskick.timing import span
from pyskick.training.losses import completion_loss, control_variate_sums

if TYPE_CHECKING:
    from pyskick.actors import Actor
    from pyskick.config import TrainConfig
    from pyskick.envs.lookaround import LookAroundEnv
    from pyskick.sidekicks.base import Sidekick
    from pyskick.timing import SpanTimer
    from pyskick.training.baselines import AverageBaseline, ControlVariate


class Batch(NamedTuple):
    """One batch, on the training device."""

    indices: Tensor
    """``[B]`` int64 positions of the viewgrids in the training split."""
    starts: Tensor
    """``[B]`` int64 start views ``n * M + m``."""
    grids: Tensor
    """``[B, N, M, C, H, W]`` uint8 viewgrids."""


class StepMetrics(NamedTuple):
    """What one step measured, each a 0-d tensor on the device summed over the batch's
    samples (a batch mean times B), so that an epoch's sums divide by its samples."""

    rec_error: Tensor
    """Final reconstruction errors (after the last glimpse)."""
    loss: Tensor
    policy_loss: Tensor
    entropy: Tensor
    """Each sample's entropy of its action distributions, averaged over the action steps."""
    critic_loss: Tensor
    supervised_loss: Tensor
    grad_norm: Tensor
    """Norm of the gradients before clipping."""

    def named(self) -> dict[str, Tensor]:
        """The metrics under their ``metrics.jsonl`` names (``train/...``)."""
        return {
            "train/rec_error": self.rec_error,
            "train/loss": self.loss,
            "train/policy_loss": self.policy_loss,
            "train/entropy": self.entropy,
            "train/critic_loss": self.critic_loss,
            "train/supervised_loss": self.supervised_loss,
            "train/grad_norm": self.grad_norm,
        }


class StepRunner(Protocol):
    """What :func:`train_step` uses of a set-up :class:`~pyskick.training.Trainer`."""

    config: TrainConfig
    T: int
    learn_actions: bool
    policy_ddp: nn.Module
    critic: nn.Module | None
    critic_ddp: nn.Module | None
    critic_calibrated: bool
    env: LookAroundEnv
    actor: Actor
    sidekick: Sidekick
    baseline: AverageBaseline
    control_variate: ControlVariate
    optimizer: torch.optim.Optimizer
    params: list[nn.Parameter]
    action_generator: torch.Generator
    dist: DistContext

    def calibrate_critic(self, rollout: Rollout, sidekick_scale: float) -> Rollout: ...


def train_step(
    run: StepRunner, batch: Batch, epoch: int, timer: SpanTimer | None = None
) -> StepMetrics:
    """Run ``batch``'s episodes, compute the loss and update the weights once.

    Args:
        run: the set-up trainer.
        batch: the batch, on the training device.
        epoch: the epoch (0-based) the sidekick's inputs and schedules are for.
        timer: adds the sidekick's and the environment's time to its spans ``"side"`` and
            ``"env"``.

    Returns:
        :class:`StepMetrics` on the device.
    """
    cfg = run.config
    with span(timer, "side"):
        reward_maps = run.sidekick.reward_maps(batch.indices, epoch)
        demos = run.sidekick.demonstrations(batch.indices, batch.starts, epoch)
        forced = forced_demonstrations(run.actor, batch.indices, batch.starts)
        if forced is not None:  # never both: checked when the trainer was set up
            demos = forced
        sidekick_scale = run.sidekick.reward_scale(epoch)
    critic = run.critic
    with autocast(batch.grids.device, cfg.precision):  # the networks' passes; losses in float32
        rollout = collect_rollout(
            run.policy_ddp,
            run.env,
            batch.grids,
            mode=run.actor.mode(training=True),
            starts=batch.starts,
            generator=run.action_generator,
            critic=run.critic_ddp,
            critic_full_obs=critic is not None and bool(critic.full_observability),
            reward_maps=reward_maps,
            demonstrations=demos,
            paste=cfg.memorize,
            decode_once=cfg.decode_once,
            check_values=False,
            timer=timer,
        )
    if not run.critic_calibrated:
        rollout = run.calibrate_critic(rollout, sidekick_scale)
    baseline = None
    with span(timer, "side"):
        uses_baseline = critic is None or cfg.critic_residual
        if run.learn_actions and uses_baseline and run.T > 1:
            sums = run.baseline.batch_sums(rollout.final_errors, rollout.intrinsic)
            run.baseline.add(all_reduce_sum(sums, run.dist))
            baseline = run.baseline.values(run.T, sidekick_scale)
    gated = baseline is not None and rollout.values is not None and cfg.critic_gate
    loss = completion_loss(
        rollout,
        baseline=baseline,
        sidekick_scale=sidekick_scale,
        learn_actions=run.learn_actions,
        reward_scale=cfg.reward_scale,
        lambda_entropy=cfg.lambda_entropy,
        critic_coeff=cfg.critic_coeff,
        supervised_scale=cfg.supervised_scale,
        critic_weight=run.control_variate.weight if gated else 1.0,
    )
    if gated:  # after the loss: the weight comes from earlier batches only
        assert baseline is not None
        cv_sums = control_variate_sums(rollout, baseline, sidekick_scale)
        run.control_variate.add(all_reduce_sum(cv_sums, run.dist))
    run.optimizer.zero_grad(set_to_none=True)
    loss.total.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(run.params, cfg.grad_clip)
    run.optimizer.step()
    B = batch.grids.shape[0]
    final = rollout.final_errors
    entropy = rollout.entropies.detach().mean(0).sum() if run.T > 1 else final.new_zeros(())
    return StepMetrics(
        rec_error=final.sum().double(),
        loss=loss.total.detach().double() * B,
        policy_loss=loss.policy.double() * B,
        entropy=entropy.double(),
        critic_loss=loss.critic.double() * B,
        supervised_loss=loss.supervised.double() * B,
        grad_norm=grad_norm.detach().double() * B,
    )


def autocast(device: torch.device, precision: str) -> torch.autocast:
    """The autocast of ``precision`` on ``device`` (disabled for ``"fp32"``): matrix products
    and convolutions in bfloat16; what autocast keeps in float32 (normalisations, softmax,
    the squared errors) in float32."""
    return torch.autocast(
        device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bf16"
    )
