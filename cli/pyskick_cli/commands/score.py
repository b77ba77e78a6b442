"""``pyskick score``: precompute a sidekick's scores of a dataset's splits into one file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pyskick_cli.outputs import check_not_inputs, check_outputs, overwrite_option
from pyskick_cli.shared_options import (
    config_option,
    dataset_option,
    device_option,
    eval_batch_size_option,
    glimpses_option,
    parse_sidekick_options,
    preset_option,
    resolve_dataset_path,
    resolve_sidekick,
    sidekick_name_option,
    sidekick_option_option,
)

if TYPE_CHECKING:
    from pyskick.sidekicks import Sidekick


def _split_names(value: str, available: tuple[str, ...]) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise click.BadParameter("name at least one split", param_hint="--splits")
    for name in names:
        if name not in available:
            raise click.BadParameter(
                f"the dataset has no split {name!r}; its splits: {', '.join(available)}",
                param_hint="--splits",
            )
    if len(set(names)) != len(names):
        raise click.BadParameter(f"a split is named twice in {value!r}", param_hint="--splits")
    return names


@click.command()
@sidekick_name_option(
    help="A registered sidekick that computes scores (rew, demo, ...; see `pyskick plugins "
    "--all`); required unless --config names one.",
)
@sidekick_option_option()
@click.option(
    "--model",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="The one-view run (or checkpoint) that scores; default: the cached one-view model of "
    "the dataset and preset, pretrained if missing (as `pyskick train` does).",
)
@dataset_option()
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The score file to write (.h5; missing folders are created).",
)
@overwrite_option
@click.option(
    "--splits",
    default="train,val",
    show_default=True,
    help="Comma-separated splits of the dataset to score.",
)
@glimpses_option(
    help="Glimpse budget of the training to come (default: the preset's; only sidekicks whose "
    "scores depend on it use it).",
)
@preset_option(
    help="Training preset (default: paper-modelnet for ModelNet-Hard-shaped data, else "
    "paper-sun360); picks the cached one-view model and T.",
)
@config_option(
    help="A flat TOML file of TrainConfig fields (applied over the preset), as given to "
    "`pyskick train`: it picks the same cached one-view model.",
)
@device_option()
@eval_batch_size_option(
    help="Episodes per forward pass while scoring (memory only; default: the preset's "
    "eval_batch_size).",
)
def score(
    sidekick: str,
    sidekick_option: tuple[str, ...],
    model: Path | None,
    dataset: str,
    out: Path,
    splits: str,
    T: int | None,
    preset: str | None,
    config_path: Path | None,
    device: str | None,
    eval_batch_size: int | str | None,
    overwrite: bool,
) -> None:
    """Precompute a sidekick's scores of a dataset into one file, for `pyskick train --scores`.

    Under `torchrun --nproc-per-node K -m pyskick_cli score ...` every split is sharded over
    the K processes and rank 0 writes the file.
    """
    from pyskick.config import paper_preset
    from pyskick.data import ViewgridFile
    from pyskick.distributed import (
        broadcast_from_main,
        init_distributed,
        resolve_device,
        settle_collectives,
    )
    from pyskick.errors import GridShapeError, UserError
    from pyskick.sidekicks import has_scores
    from pyskick.sidekicks.scores import (
        ScoreMeta,
        Scorer,
        compute_scores_sharded,
        score_key,
        write_scores,
    )
    from pyskick.training import TrainData, load_config
    from pyskick.training.one_view_cache import cache_folder, cached_one_view

    try:  # missing folders are created when the file is written
        check_outputs([out], overwrite=overwrite)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--out") from None
    path = resolve_dataset_path(dataset)
    source = ViewgridFile(path)
    names = _split_names(splits, source.splits)
    default = paper_preset(source.spec.preset)
    overrides = {
        "T": T,
        "device": device,
        "eval_batch_size": eval_batch_size,
        "sidekick": sidekick,
        "sidekick_options": parse_sidekick_options(sidekick_option),
    }
    config = load_config(config_path, preset=preset, overrides=overrides, default_preset=default)
    try:  # what is read: the data, the config file, the one-view model (given or cached)
        cached = cache_folder(source, config) if model is None else None
        check_not_inputs([out], [path, model, config_path, cached])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--out") from None
    if sidekick is None and config.sidekick == "none":  # --sidekick is optional for --config
        raise click.BadParameter(
            "no sidekick named: give --sidekick NAME (or sidekick in --config)",
            param_hint="--sidekick",
        )
    chosen = resolve_sidekick(config, source.spec, given_name=True, config_path=config_path)

    def build(one_view: Path) -> Sidekick:
        return chosen.build(one_view=one_view, spec=source.spec, config=config)

    # Built on the cached model's folder first, so that a sidekick without scores is refused
    # before a one-view model is pretrained for it.
    helper = build(model or cache_folder(source, config))
    if not has_scores(helper):
        raise click.BadParameter(
            f"sidekick {chosen.name!r} computes no scores", param_hint="--sidekick"
        )
    if model is None:
        helper = build(cached_one_view(source, config, TrainData.from_file(source)))
    # has_scores(helper) above, for the type checker: the helper built again is the same kind.
    assert isinstance(helper, Scorer)

    run_device = resolve_device(config.device)
    ctx = init_distributed(run_device)
    per_split, keys = {}, {}
    for name in names:
        grids = source.split(name).load()
        keys[name] = score_key(helper, grids, config.T)
        start = time.perf_counter()
        try:
            per_split[name] = compute_scores_sharded(helper, grids, T=config.T, device=run_device)
        except GridShapeError as exc:  # the file, split and model that do not fit
            what = f"--model {model}" if model is not None else "the cached one-view model"
            raise UserError(f"{source.path} (split {name!r}) does not fit {what}: {exc}") from None
        seconds = time.perf_counter() - start
        if ctx.is_main:
            click.echo(
                f"{name}: {len(grids)} viewgrids scored in {seconds:.2f} s "
                f"({ctx.world_size} process{'es' if ctx.world_size > 1 else ''})"
            )
    meta = ScoreMeta.of(helper, config.T, keys)

    def write() -> Path:
        out.parent.mkdir(parents=True, exist_ok=True)  # like every command's outputs
        return write_scores(out, per_split, meta=meta)

    # Rank 0 writes; the others wait for it, and fail with it.
    broadcast_from_main(write, run_device, "writing the score file")
    if ctx.is_main:
        click.echo(f"wrote {chosen.name} scores of {', '.join(names)} to {out}")
    # Every rank past its last collective before any leaves: a rank that exited while its
    # peer's gloo threads still held work aborted once in a loaded test run ("terminate called
    # without an active exception"; pytorch#190489). The command line then ends each rank
    # without tearing the group down (pyskick.distributed.end_process).
    settle_collectives()
