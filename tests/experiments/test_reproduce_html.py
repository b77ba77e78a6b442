"""The report page: table rows, ordering verdicts and links to figures that exist."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from urllib.parse import quote, unquote

from PIL import Image

from pyskick.data import ViewgridFile
from pyskick.experiments import write_report
from pyskick.experiments.layout import run_dir
from pyskick.run_dir import load_policy


def test_report_links_every_figure_and_reuses_them(finished: Path, scenes: Path) -> None:
    table = json.loads((finished / "table.json").read_text())
    source = ViewgridFile(scenes)
    test = source.split("test").load()
    mean = source.spec.channel_mean
    index = write_report(finished, table, test, channel_mean=mean, device="cpu", examples=1)
    assert index == finished / "index.html"
    page = index.read_text()
    methods = [row["method"] for row in table["rows"]]
    for method in methods:
        assert f"<tr><td>{html.escape(method)}</td>" in page
    assert "ours(rew) better than ltla: <b>" in page
    links = re.findall(r'<img src="([^"]+)"', page)
    assert links[0] == "curves.png"
    for link in links:
        assert (finished / unquote(link)).is_file(), link
    for method in methods:
        episodes = [
            link for link in links
            if link.startswith(f"figures/{quote(method)}/") and link.endswith("_episode.png")
        ]  # fmt: skip
        assert len(episodes) == 1, method
        # Its animation is embedded right after it.
        gif = episodes[0].removesuffix(".png") + ".gif"
        assert links[links.index(episodes[0]) + 1] == gif, method
        with Image.open(finished / unquote(gif)) as image:
            assert image.format == "GIF", method
            assert image.n_frames == load_policy(run_dir(finished, method, 0), "cpu").T, method
    # Policy heatmaps for learned actors only.
    assert any(link.startswith("figures/ltla/") and "heatmaps" in link for link in links)
    assert not any(link.startswith("figures/rnd-actions/") and "heatmaps" in link for link in links)
    # The sidekicks' maps of the one example test viewgrid.
    assert {link for link in links if link.startswith("figures/sidekick-maps/")} == {
        "figures/sidekick-maps/test0_reward_maps.png",
        "figures/sidekick-maps/test0_coverage.png",
    }
    # A second report reuses the figures of unchanged runs.
    figures = sorted((finished / "figures").rglob("*.png"))
    before = [path.stat().st_mtime_ns for path in figures]
    write_report(finished, table, test, channel_mean=mean, device="cpu", examples=1)
    assert [path.stat().st_mtime_ns for path in figures] == before
    assert index.read_text() == page


def test_the_page_header_is_a_settings_table_without_paths(finished: Path, scenes: Path) -> None:
    """Issue 26: the header was a raw Python dict with the dataset's absolute path."""
    page = (finished / "index.html").read_text() if (finished / "index.html").is_file() else ""
    if not page:
        table = json.loads((finished / "table.json").read_text())
        source = ViewgridFile(scenes)
        write_report(finished, table, source.split("test").load(),
                     channel_mean=source.spec.channel_mean, device="cpu", examples=1)  # fmt: skip
        page = (finished / "index.html").read_text()
    header = page[page.index("<h2>Settings</h2>") : page.index("</details>")]
    settings = json.loads((finished / "reproduce.json").read_text())
    assert str(Path(settings["dataset"]).parent) not in page  # no absolute path anywhere
    digest = settings["dataset_sha256"][:12]
    assert (
        f"<tr><th>dataset</th><td><code>{scenes.name} (SHA-256 {digest}…)</code></td></tr>"
        in header
    )
    assert "<tr><th>policy training epochs</th><td><code>1</code></td></tr>" in header
    assert "{'" not in page  # no Python dict printed


def test_a_report_without_matplotlib_says_why(
    finished: Path, scenes: Path, tmp_path: Path, monkeypatch
) -> None:
    """Issue 26: without matplotlib, reproduce said nothing about the figures it skipped."""
    import shutil
    import sys

    folder = tmp_path / "copy"
    shutil.copytree(finished, folder)
    monkeypatch.setitem(sys.modules, "pyskick.viz", None)  # importing it raises ImportError
    table = json.loads((folder / "table.json").read_text())
    source = ViewgridFile(scenes)
    said: list[str] = []
    write_report(folder, table, source.split("test").load(),
                 channel_mean=source.spec.channel_mean, device="cpu", log=said.append)  # fmt: skip
    assert said == [
        "reproduce: no figures in the report: figures need matplotlib (pip install "
        "'pyskick[viz]'): import of pyskick.viz halted; None in sys.modules"
    ]


def test_the_page_says_how_a_plan_judged_the_claims(
    finished: Path, scenes: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "planned"
    shutil.copytree(finished, folder)
    table = json.loads((folder / "table.json").read_text())
    table["plan"] = {
        "pilot": {"folders": ["pilot"], "seeds": 16, "eval_split": "val"},
        "target_power": 0.9,
        "applied": True,
    }
    claim = table["claims"][0]
    claim.update(verdict="not resolved", under_powered=True, plan_seeds_needed=24)
    source = ViewgridFile(scenes)
    write_report(folder, table, source.split("test").load(),
                 channel_mean=source.spec.channel_mean, device="cpu", examples=1)  # fmt: skip
    page = (folder / "index.html").read_text()
    assert (
        "With the power plan of 16 pilot seeds on the val split, a claim it gives less than 90% "
        "power at these seeds is not resolved at this budget unless its intervals contradict it."
    ) in page
    assert f"<b>{claim['name']}: not resolved at this budget (needs ≈ 24 seeds)</b>" in page
