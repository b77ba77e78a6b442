"""one_view_coverage against a plain per-start loop over a real tiny one-view model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pyskick.run_dir import load_policy
from pyskick.sidekicks.coverage import one_view_coverage

MEAN = (110.0,)


def loop_coverage(
    policy: torch.nn.Module, grids: torch.Tensor, *, absolute_slots: bool | None = None
) -> torch.Tensor:
    """The paper's recipe written out: one glimpse from each start (i, j), no paste, the error
    of every target view (n, m) summed over pixels, read from the decoder slot that holds it,
    ``1 / (1000 err + 1e-8)``, then min-max over sources per target.

    ``absolute_slots`` overrides where the decoder holds view (n, m) (default: absolute slots
    exactly when the azimuth is known), to show that a frame mistake is caught.
    """
    cfg = policy.config
    if absolute_slots is None:
        absolute_slots = cfg.known_azimuth
    N, M = cfg.n_elevations, cfg.n_azimuths
    V = N * M
    x = (grids.float() - MEAN[0]) / 255.0
    out = torch.empty(grids.shape[0], V, V)
    with torch.no_grad():
        for b in range(grids.shape[0]):
            util = torch.empty(V, V, dtype=torch.float64)
            for i in range(N):
                for j in range(M):
                    pro = [0.0, 0.0, float(i)] + ([float(j)] if cfg.known_azimuth else [])
                    decoded = policy(
                        x[b, i, j][None], torch.tensor([pro]), 0, None, azimuth=torch.tensor([j])
                    ).decoded[0]
                    for n in range(N):
                        for m in range(M):
                            # Without a known azimuth, slot k holds azimuth (j + k) mod M.
                            slot = m if absolute_slots else (m - j) % M
                            err = (decoded[n, slot].double() - x[b, n, m].double()).pow(2).sum()
                            util[i * M + j, n * M + m] = 1.0 / (1000.0 * err + 1e-8)
            lo, hi = util.amin(0), util.amax(0)
            out[b] = ((util - lo) / (hi - lo + 1e-8)).float()
    return out


@pytest.mark.parametrize("known_azimuth", [False, True])
def test_matches_a_per_start_loop(
    known_azimuth: bool, tmp_path: Path, save_one_view, smooth_grids
) -> None:
    ckpt = save_one_view(tmp_path / "best.pt", known_azimuth=known_azimuth, seed=3)
    grids = smooth_grids(3, seed=7)
    # batch_size 24 = two viewgrids of 12 starts per pass: chunks of 2 and 1.
    got = one_view_coverage(ckpt, grids, channel_mean=MEAN, batch_size=24)
    expected = loop_coverage(load_policy(ckpt).policy, grids)
    assert got.shape == (3, 12, 12)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=1e-3, rtol=0)
    # The tolerance covers float32 batch-size effects; a frame mistake is far outside it.
    policy = load_policy(ckpt).policy
    wrong = loop_coverage(policy, grids, absolute_slots=not known_azimuth)
    assert float((wrong - got).abs().max()) > 0.1
    # Nothing pasted: a view's own reconstruction is not always its best source.
    diagonal = got.diagonal(dim1=1, dim2=2)
    assert float(diagonal.min()) < 0.99
    assert float(got.min()) >= 0.0
    assert float(got.max()) <= 1.0


def test_run_folder_chunking_and_batchnorm_eval(one_view_ckpt: Path, smooth_grids) -> None:
    grids = smooth_grids(3, seed=11)
    run = one_view_ckpt.parent  # a run folder: its best.pt is used
    whole = one_view_coverage(run, grids, channel_mean=MEAN, batch_size=1000)
    one_by_one = one_view_coverage(run, grids, channel_mean=MEAN, batch_size=1)
    torch.testing.assert_close(whole, one_by_one, atol=1e-5, rtol=0)
    # The same samples alone give the same rows (samples are independent: shardable).
    torch.testing.assert_close(
        one_view_coverage(run, grids[1:2], channel_mean=MEAN), whole[1:2], atol=1e-5, rtol=0
    )
    assert one_view_coverage(run, grids[:0], channel_mean=MEAN).shape == (0, 12, 12)
    # The model's BatchNorm statistics matter (so the per-start loop, in eval mode, would
    # catch a train-mode pass): a train-mode forward of the same views differs.
    policy = load_policy(run).policy
    assert not policy.training
    views = (grids[0].flatten(0, 1).float() - MEAN[0]) / 255.0
    proprio = torch.zeros(views.shape[0], 3)
    with torch.no_grad():
        evaluated = policy(views, proprio, 0).decoded
        trained = policy.train()(views, proprio, 0).decoded
    assert float((evaluated - trained).abs().max()) > 1e-3


def test_bad_inputs_are_rejected(one_view_ckpt: Path, smooth_grids, tmp_path: Path) -> None:
    grids = smooth_grids(2)
    with pytest.raises(TypeError, match="uint8"):
        one_view_coverage(one_view_ckpt, grids.float(), channel_mean=MEAN)
    with pytest.raises(ValueError, match=r"grids must have shape \[n, 3, 4, 1, 16, 16\]"):
        one_view_coverage(one_view_ckpt, grids[:, :2], channel_mean=MEAN)
    with pytest.raises(ValueError, match="batch_size"):
        one_view_coverage(one_view_ckpt, grids, channel_mean=MEAN, batch_size=0)
    with pytest.raises(FileNotFoundError):
        one_view_coverage(tmp_path / "nowhere", grids, channel_mean=MEAN)
