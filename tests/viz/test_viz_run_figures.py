"""Episode and heatmap figures of real tiny runs; the recorded episodes they draw."""

from __future__ import annotations

import pytest
import torch

from pyskick.envs.views import normalize_views
from pyskick.evaluation import evaluate_policy
from pyskick.run_dir import load_policy
from pyskick.viz import visualize_run
from pyskick.viz.episodes import record_episodes
from pyskick.viz.layout import GridLayout, draw_move
from pyskick.viz.run_figures import choose_examples


def test_episode_and_heatmap_pngs(tiny_runs, tmp_path, assert_real_png):
    out = tmp_path / "figs"
    grids = tiny_runs.data.val
    paths = visualize_run(
        tiny_runs.ltla, grids, channel_mean=tiny_runs.data.channel_mean, out_dir=out, examples=2
    )
    chosen, _ = choose_examples(grids.shape[0], 2, 0, 12)
    names = [f"example{k}_grid{i}_{kind}.png" for k, i in enumerate(chosen.tolist())
             for kind in ("episode", "heatmaps")]  # fmt: skip
    assert [p.name for p in paths] == names
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    for path in paths:
        assert_real_png(path, min_size=(600, 300))
    again = visualize_run(
        tiny_runs.ltla, grids, channel_mean=tiny_runs.data.channel_mean, out_dir=out, examples=2
    )
    assert again == paths  # same seed, same examples


def test_one_view_and_no_heatmaps_draw_episodes_only(tiny_runs, tmp_path, assert_real_png):
    grids = tiny_runs.data.val
    mean = tiny_runs.data.channel_mean
    one = visualize_run(tiny_runs.one_view, grids, channel_mean=mean, out_dir=tmp_path / "a")
    assert [p.name.endswith("_episode.png") for p in one] == [True] * 3
    assert_real_png(one[0], min_size=(300, 100))
    many = visualize_run(
        tiny_runs.ltla, grids[:2], channel_mean=mean, out_dir=tmp_path / "b", examples=5,
        heatmaps=False, seed=3,
    )  # fmt: skip
    assert len(many) == 2  # at most every viewgrid once
    assert all(p.name.endswith("_episode.png") for p in many)


def test_bad_inputs_write_nothing(tiny_runs, tmp_path):
    out = tmp_path / "never"
    mean = tiny_runs.data.channel_mean
    grids = tiny_runs.data.val
    with pytest.raises(ValueError, match=r"grids must have shape \[n>0, 3, 4, 1, 16, 16\]"):
        visualize_run(tiny_runs.ltla, grids[:, :, :2], channel_mean=mean, out_dir=out)
    with pytest.raises(TypeError, match="uint8"):
        visualize_run(tiny_runs.ltla, grids.float(), channel_mean=mean, out_dir=out)
    with pytest.raises(ValueError, match="examples must be a positive int"):
        visualize_run(tiny_runs.ltla, grids, channel_mean=mean, out_dir=out, examples=0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        visualize_run(tmp_path / "no-run", grids, channel_mean=mean, out_dir=out)
    with pytest.raises(ValueError, match="channel_mean"):
        visualize_run(tiny_runs.ltla, grids, channel_mean=(1.0, 2.0), out_dir=out)
    assert not out.exists()
    a_file = tmp_path / "file.png"
    a_file.write_bytes(b"x")
    with pytest.raises(ValueError, match="not a folder"):
        visualize_run(tiny_runs.ltla, grids, channel_mean=mean, out_dir=a_file)


def test_recorded_episodes_paste_views_where_they_were_seen(tiny_runs):
    saved = load_policy(tiny_runs.ltla)
    grids = tiny_runs.data.val
    mean = tiny_runs.data.channel_mean
    starts = torch.tensor([0, 3, 5, 7, 10, 11])
    ep = record_episodes(saved.policy, grids, starts, channel_mean=mean, T=saved.T)
    assert ep.decoded.shape == (3, 6, 3, 4, 1, 16, 16)
    truth = normalize_views(grids, torch.tensor(mean))
    for b in range(6):
        assert ep.visited[b, 0] == starts[b]
        for t in range(saved.T):
            for view in ep.visited[b, : t + 1].tolist():
                n, m = divmod(view, 4)
                torch.testing.assert_close(ep.decoded[t, b, n, m], truth[b, n, m])
    # The same episodes as the evaluation's (greedy actions, pasted views).
    result = evaluate_policy(saved.policy, grids, channel_mean=mean, T=saved.T, metric="adv")
    torch.testing.assert_close(ep.errors[-1], result.per_start[torch.arange(6), starts].float())


def test_forced_actions_replace_the_policys_choices(tiny_runs):
    saved = load_policy(tiny_runs.ltla)
    grids = tiny_runs.data.val
    mean = tiny_runs.data.channel_mean
    starts = torch.tensor([0, 3, 5, 7, 10, 11])
    forced = torch.arange(12).view(2, 6)  # [T-1, B]
    ep = record_episodes(saved.policy, grids, starts, channel_mean=mean, T=3, forced=forced)
    assert torch.equal(ep.actions, forced.T)
    greedy = record_episodes(saved.policy, grids, starts, channel_mean=mean, T=3)
    assert not torch.equal(greedy.actions, ep.actions)


def test_moves_are_drawn_between_view_centres():
    from pyskick.viz._mpl import pyplot

    plt = pyplot()
    layout = GridLayout(N=3, M=4, H=16, W=16)
    fig, ax = plt.subplots()
    try:
        draw_move(ax, layout, 1, 6, +1, color="red")  # (0, 1) -> (1, 2)
        (arrow,) = ax.patches
        ax.set_xlim(-0.5, layout.size[1] - 0.5)
        ax.set_ylim(layout.size[0] - 0.5, -0.5)
        fig.canvas.draw()
        shaft = arrow.get_path().vertices  # data coordinates: start, middle, end of the shaft
        assert tuple(shaft[0]) == pytest.approx(layout.center(0, 1))
        assert tuple(shaft[2]) == pytest.approx(layout.center(1, 2), abs=6)  # the head's shrink
        draw_move(ax, layout, 3, 4, +1, color="red")  # (0, 3) -> (1, 0) across the seam
        assert len(ax.patches) == 3
        draw_move(ax, layout, 2, 2, 0, color="red")  # stay: a ring
        assert type(ax.patches[-1]).__name__ == "Circle"
    finally:
        plt.close(fig)
    assert layout.size == (3 * 16 + 2 * 2, 4 * 16 + 3 * 2)
    assert layout.center(0, 0) == (7.5, 7.5)
    assert layout.center(2, 3) == (3 * 18 + 7.5, 2 * 18 + 7.5)
