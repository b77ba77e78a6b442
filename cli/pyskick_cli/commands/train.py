"""``pyskick pretrain`` and ``pyskick train``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pyskick_cli.options import (
    check_run_dataset,
    parse_sidekick_options,
    record_run_dataset,
    recorded_init,
    recorded_sidekick,
    registered,
    resolve_dataset_path,
    resolve_run_options,
    sidekick_option_option,
    training_options,
)

if TYPE_CHECKING:
    from pyskick.training import TrainConfig, TrainData


def _config(
    preset: str | None, config_path: Path | None, spec_preset: str, **overrides: Any
) -> TrainConfig:
    from pyskick.training import load_config

    default = "paper-modelnet" if spec_preset == "modelnet-hard" else "paper-sun360"
    return load_config(config_path, preset=preset, overrides=overrides, default_preset=default)


def _prepare(dataset: str, out_dir: Path, resume: bool) -> tuple[Path, str]:
    """Resolve the dataset and check --out/--resume before anything is trained or written."""
    from pyskick.data import ViewgridFile

    path = resolve_dataset_path(dataset)
    check_run_dataset(out_dir, path, resume=resume)
    return path, ViewgridFile(path).spec.preset


def _load_data(path: Path) -> TrainData:
    from pyskick.training import TrainData

    return TrainData.from_file(path)


def _check_names(critic: str | None, actor: str | None) -> None:
    """Unknown critic or actor names are usage errors listing the registered ones."""
    if critic is not None:
        registered("critic", critic, "--critic")
    if actor is not None:
        registered("actor", actor, "--actor")


def _report(result: Any) -> None:
    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun, rank 0 speaks for all
        return
    click.echo(
        f"{result.stage} finished: {result.epochs} epochs, best val error "
        f"{result.best_val * 1000:.2f} x1e-3, run in {result.run_dir}",
        err=True,
    )


@click.command()
@training_options
def pretrain(
    dataset: str,
    preset: str | None,
    config_path: Path | None,
    epochs: int | None,
    batch_size: int | None,
    lr: float | None,
    seed: int | None,
    device: str | None,
    out_dir: Path,
    resume: bool,
) -> None:
    """Train the one-view model (T = 1): every module learns to reconstruct from one glimpse."""
    from pyskick.training import pretrain as run_pretrain

    path, spec_preset = _prepare(dataset, out_dir, resume)
    config = _config(
        preset, config_path, spec_preset, pretrain_epochs=epochs, batch_size=batch_size, lr=lr,
        seed=seed, device=device,
    )  # fmt: skip
    data = _load_data(path)
    record_run_dataset(out_dir, path)
    _report(run_pretrain(config, out_dir, data, resume=resume))


@click.command()
@training_options
@click.option(
    "--init",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="A one-view run (or checkpoint) to start from; default: pretrain one, or reuse the "
    "cached one for this dataset and config.",
)
@click.option("--T", "T", type=click.IntRange(min=2), default=None, help="Glimpses per episode.")
@click.option(
    "--critic",
    default=None,
    help="A registered critic (baseline of the policy gradient): average, critic (learned) or "
    "asymm-critic (learned, sees the whole grid: asymm-ac); see `pyskick plugins --all`.",
)
@click.option(
    "--actor",
    default=None,
    help="A registered actor (who picks the motions): learned (the policy), random "
    "(rnd-actions) or demo-actions (greedy coverage; needs full observability at test time); "
    "see `pyskick plugins --all`.",
)
@click.option(
    "--sidekick",
    default=None,
    help="A registered sidekick: none (ltla, the default), rew (reward shaping from one-view "
    "scores), demo (greedy coverage demonstrations) or one a plugin adds (rnd-rewards, "
    "expert-clone, ...); see `pyskick plugins --all`.",
)
@sidekick_option_option
@click.option(
    "--scores",
    "scores_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The sidekick's precomputed scores (`pyskick score`); refused when computed for other "
    "data, model or options. Default: the score cache, computed on a miss.",
)
def train(
    dataset: str,
    preset: str | None,
    config_path: Path | None,
    epochs: int | None,
    batch_size: int | None,
    lr: float | None,
    seed: int | None,
    device: str | None,
    out_dir: Path,
    resume: bool,
    init: Path | None,
    T: int | None,
    critic: str | None,
    actor: str | None,
    sidekick: str | None,
    sidekick_option: tuple[str, ...],
    scores_file: Path | None,
) -> None:
    """Train the look-around policy from a one-view model, Sense and Fuse frozen.

    Without a sidekick this is ltla; `--sidekick rew` is ours(rew), `--sidekick demo` is
    ours(demo). `--sidekick-option KEY=VALUE` sets a sidekick's option (`pyskick plugins
    --all` lists them); the run records every option with its default in config.json, and a
    resumed run keeps them.
    """
    from pyskick.data import ViewgridFile
    from pyskick.sidekicks import make_sidekick
    from pyskick.sidekicks.scores import load_scores_file
    from pyskick.training import train as run_train
    from pyskick.training.one_view_cache import cached_one_view

    if sidekick is not None:
        registered("sidekick", sidekick, "--sidekick")
    _check_names(critic, actor)
    path, spec_preset = _prepare(dataset, out_dir, resume)
    config = _config(
        preset, config_path, spec_preset, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
        device=device, T=T, critic=critic, actor=actor, sidekick=sidekick,
        sidekick_options=parse_sidekick_options(sidekick_option),
    )  # fmt: skip
    if resume and sidekick is None and config.sidekick == "none":
        # Not given again: a resumed run continues with its own sidekick.
        config = config.replace(sidekick=recorded_sidekick(out_dir) or "none")
    # A config file's names too, before any work.
    _check_names(config.critic, config.actor)
    registered("sidekick", config.sidekick, "--sidekick")
    spec = ViewgridFile(path).spec
    options = resolve_run_options(config, spec, out_dir if resume else None)
    config = config.replace(sidekick_options=options)
    data = _load_data(path)
    if resume and init is None:
        init = recorded_init(out_dir)
    if init is None:
        init = cached_one_view(path, config, data)
    helper = make_sidekick(
        config.sidekick, one_view=init, spec=spec, config=config, options=options
    )
    if scores_file is not None:  # checked here so that stale scores leave no run folder behind
        load_scores_file(helper, data.train, scores_file, T=config.T)
        helper.scores_file = scores_file
    record_run_dataset(out_dir, path, init=init)
    _report(run_train(config, out_dir, data, init=init, resume=resume, sidekick=helper))
