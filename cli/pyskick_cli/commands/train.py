"""``pyskick pretrain`` and ``pyskick train``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pyskick_cli.shared_options import (
    actor_name_option,
    check_run_dataset,
    critic_name_option,
    decode_once_option,
    glimpses_option,
    parse_sidekick_options,
    registered,
    resolve_dataset_path,
    resolve_loggers,
    resolve_sidekick,
    sidekick_name_option,
    sidekick_option_option,
    training_dataset,
    training_options,
)

if TYPE_CHECKING:
    from pyskick.data import ViewgridFile
    from pyskick.training import TrainConfig, TrainData

# --out is locked first, before any check or work (one writer at a time: a second start is
# refused at once, naming the first); a refused command leaves --out as it was (the lock file,
# and the folder when this command created it, are removed again).


def _config(
    preset: str | None, config_path: Path | None, spec_preset: str, **overrides: Any
) -> TrainConfig:
    from pyskick.config import paper_preset
    from pyskick.errors import UserError
    from pyskick.training import load_config
    from pyskick.training.setup import MAX_SEED

    default = paper_preset(spec_preset)
    config = load_config(config_path, preset=preset, overrides=overrides, default_preset=default)
    if config.seed > MAX_SEED:  # before torch sees it (an overflow that names nothing)
        why = f"seed {config.seed} is out of range (0 to {MAX_SEED})"
        if overrides.get("seed") is None:  # the config file's
            raise UserError(f"config file {config_path}: {why}")
        raise click.BadParameter(why, param_hint="--seed")
    return config


@contextmanager
def _claimed(out_dir: Path) -> Iterator[None]:
    """Hold --out's lock for the whole command (rank 0 of a torchrun launch: the other ranks
    never write it); a path that cannot become a folder is refused first."""
    from pyskick._io import check_writable_folder
    from pyskick.distributed import is_main
    from pyskick.run_dir import RunDir

    try:
        check_writable_folder(out_dir)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--out") from None
    if not is_main():
        yield
        return
    with RunDir(out_dir).claimed():
        yield


def _prepare(dataset: str | None, out_dir: Path, resume: bool, stage: str) -> ViewgridFile:
    """Open the dataset (once for the whole command: its spec and digest travel with it) and
    check --out/--resume before anything is trained or written."""
    from pyskick.data import ViewgridFile
    from pyskick.run_dir import RunDir

    if resume:  # before the dataset, which may be generated on first use
        RunDir(out_dir).check_resumable(stage)
    chosen = training_dataset(dataset, out_dir, resume=resume)
    source = ViewgridFile(resolve_dataset_path(chosen))
    check_run_dataset(out_dir, source, resume=resume)
    return source


def _load_data(source: ViewgridFile, config: TrainConfig) -> TrainData:
    """The dataset's splits, and the checks that need them but no model (device, batch size)."""
    from pyskick.training import TrainData
    from pyskick.training.setup import check_request

    data = TrainData.from_file(source)
    check_request(config, data)
    return data


def _resumed_init(out_dir: Path, given: Path | None) -> Path | None:
    """The one-view run a resumed run goes on with (its checkpoint's, else its record's),
    wherever it is now; one given with --init must be the same model
    (:func:`~pyskick.training.state.resumed_init`)."""
    from pyskick.checkpoint import load_checkpoint
    from pyskick.errors import UserError
    from pyskick.run_dir import RunDir
    from pyskick.training.state import resumed_init

    run = RunDir(out_dir)
    record = load_checkpoint(run.latest) if run.has_checkpoint() else run.dataset_record() or {}
    try:
        init, _ = resumed_init(out_dir, record, given)
    except UserError as exc:
        if given is None:  # the recorded one changed: nothing the user gave
            raise
        raise click.BadParameter(str(exc), param_hint="--init") from None
    return None if init is None else Path(init)


def _check_names(critic: str | None, actor: str | None) -> None:
    """Unknown critic or actor names are usage errors listing the registered ones."""
    if critic is not None:
        registered("critic", critic, "--critic")
    if actor is not None:
        registered("actor", actor, "--actor")


def _report(result: Any) -> None:
    from pyskick.distributed import is_main

    if not is_main():  # under torchrun, rank 0 speaks for all
        return
    click.echo(
        f"{result.stage} finished: {result.epochs} epochs, best val error "
        f"{result.best_val * 1000:.2f} x1e-3, run in {result.run_dir}",
        err=True,
    )


@click.command()
@training_options
def pretrain(
    dataset: str | None,
    preset: str | None,
    config_path: Path | None,
    epochs: int | None,
    batch_size: int | None,
    lr: float | None,
    seed: int | None,
    device: str | None,
    data_on_device: str | None,
    precision: str | None,
    cuda_graph: bool | None,
    channels_last: bool | None,
    compile: bool | None,
    cudnn_benchmark: bool | None,
    eval_batch_size: int | str | None,
    save_every: int | None,
    logger: tuple[str, ...],
    out_dir: Path,
    resume: bool,
) -> None:
    """Train the one-view model (T = 1): every module learns to reconstruct from one glimpse."""
    from pyskick.training.trainer import Trainer

    with _claimed(out_dir):
        loggers = resolve_loggers(logger, out_dir if resume else None)
        source = _prepare(dataset, out_dir, resume, "pretrain")
        config = _config(
            preset, config_path, source.spec.preset, pretrain_epochs=epochs, batch_size=batch_size,
            lr=lr, seed=seed, device=device, data_on_device=data_on_device,
            precision=precision, cuda_graph=cuda_graph, channels_last=channels_last,
            compile=compile, cudnn_benchmark=cudnn_benchmark, eval_batch_size=eval_batch_size,
            save_every=save_every,
        )  # fmt: skip
        data = _load_data(source, config)
        trainer = Trainer(config, out_dir, data, stage="pretrain", resume=resume, loggers=loggers)
        _report(trainer.fit())


@click.command()
@training_options
@click.option(
    "--init",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="A one-view run (folder, export folder or checkpoint) to start from; default: "
    "pretrain one, or reuse the cached one for this dataset and config. With --resume, only "
    "the run's own, e.g. where its folder moved to (the same checkpoint bytes).",
)
@glimpses_option(type=click.IntRange(min=2))
@critic_name_option(
    help="A registered critic (baseline of the policy gradient): average, critic (learned) or "
    "asymm-critic (learned, sees the whole grid: asymm-ac); see `pyskick plugins --all`.",
)
@actor_name_option(
    help="A registered actor (who picks the motions): learned (the policy), random "
    "(rnd-actions) or demo-actions (greedy coverage; needs full observability at test time); "
    "see `pyskick plugins --all`.",
)
@sidekick_name_option(
    help="A registered sidekick: none (ltla, the default), rew (reward shaping from one-view "
    "scores), demo (greedy coverage demonstrations) or one a plugin adds; see `pyskick plugins "
    "--all`.",
)
@sidekick_option_option()
@decode_once_option()
@click.option(
    "--pretrain-epochs",
    type=click.IntRange(min=1),
    default=None,
    help="Epochs of the one-view model pretrained (and cached) when --init is not given; "
    "default: the preset's (paper: 100). Part of the cache key.",
)
@click.option(
    "--scores",
    "scores_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The sidekick's precomputed scores (`pyskick score`); refused when computed for other "
    "data, model or options. Default: the score cache, computed on a miss.",
)
def train(
    dataset: str | None,
    preset: str | None,
    config_path: Path | None,
    epochs: int | None,
    batch_size: int | None,
    lr: float | None,
    seed: int | None,
    device: str | None,
    data_on_device: str | None,
    precision: str | None,
    cuda_graph: bool | None,
    channels_last: bool | None,
    compile: bool | None,
    cudnn_benchmark: bool | None,
    eval_batch_size: int | str | None,
    save_every: int | None,
    logger: tuple[str, ...],
    out_dir: Path,
    resume: bool,
    init: Path | None,
    T: int | None,
    critic: str | None,
    actor: str | None,
    sidekick: str | None,
    sidekick_option: tuple[str, ...],
    decode_once: bool | None,
    pretrain_epochs: int | None,
    scores_file: Path | None,
) -> None:
    """Train the look-around policy from a one-view model, Sense and Fuse frozen.

    Without a sidekick this is ltla; `--sidekick rew` is ours(rew), `--sidekick demo` is
    ours(demo). `--sidekick-option KEY=VALUE` sets a sidekick's option (`pyskick plugins
    --all` lists them); the run records every option with its default in config.json, and a
    resumed run keeps them.
    """
    from pyskick.sidekicks.scores import load_scores_file
    from pyskick.training.one_view_cache import cached_one_view
    from pyskick.training.setup import check_init, check_policy_glimpses
    from pyskick.training.trainer import Trainer

    with _claimed(out_dir):
        loggers = resolve_loggers(logger, out_dir if resume else None)
        source = _prepare(dataset, out_dir, resume, "train")
        config = _config(
            preset, config_path, source.spec.preset, epochs=epochs, batch_size=batch_size, lr=lr,
            seed=seed, device=device, data_on_device=data_on_device, precision=precision,
            cuda_graph=cuda_graph, channels_last=channels_last, compile=compile,
            cudnn_benchmark=cudnn_benchmark, decode_once=decode_once,
            eval_batch_size=eval_batch_size,
            save_every=save_every, T=T, critic=critic, actor=actor, sidekick=sidekick,
            sidekick_options=parse_sidekick_options(sidekick_option),
            pretrain_epochs=pretrain_epochs,
        )  # fmt: skip
        if pretrain_epochs is not None and (init is not None or resume):
            raise click.BadParameter(
                "--pretrain-epochs sets the one-view model pretrained when there is no --init; "
                "a run with --init or --resume pretrains nothing",
                param_hint="--pretrain-epochs",
            )
        # A config file's names and T, before any work (the command line's are checked when
        # parsed).
        _check_names(config.critic, config.actor)
        check_policy_glimpses(config, config_path)  # -T is at least 2: the file's
        spec = source.spec
        # The one resolution of the run's sidekick (a resumed run keeps its own unless one is
        # named, and its recorded options).
        chosen = resolve_sidekick(
            config, spec, given_name=sidekick is not None or config.sidekick != "none",
            resume_dir=out_dir if resume else None, config_path=config_path,
        )  # fmt: skip
        config = config.replace(sidekick=chosen.name, sidekick_options=chosen.options)
        if scores_file is not None and chosen.name == "none":  # before any one-view pretraining
            raise click.BadParameter(
                "sidekick 'none' has no scores; name the sidekick they are of (e.g. --sidekick "
                "rew)",
                param_hint="--scores",
            )
        data = _load_data(source, config)
        if resume:
            init = _resumed_init(out_dir, init)
        elif init is not None:
            check_init(init, config, data)
        if init is None and not resume:  # a resumed run goes on as it started
            # Last: pretraining a one-view model is the one long step before training.
            init = cached_one_view(source, config, data)
        helper = chosen.build(one_view=init, spec=spec, config=config)
        if scores_file is not None:  # stale scores refused before any training
            load_scores_file(helper, data.train, scores_file, T=config.T)
        trainer = Trainer(
            config, out_dir, data, stage="train", init=init, resume=resume, sidekick=helper,
            loggers=loggers, scores=scores_file,
        )  # fmt: skip
        _report(trainer.fit())
