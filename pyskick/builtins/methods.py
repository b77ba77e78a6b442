"""Built-in methods: the rows of the paper's Table 1 made only of built-in parts.

Each row is registered at its Table 1 index (``position``); the plugin distributions under
``plugins/`` register theirs (rnd-rewards, expert-clone) at theirs, through the same hook.
"""

from __future__ import annotations

from pyskick.hookspecs import RegisterMethod, hookimpl
from pyskick.methods import ONE_VIEW


@hookimpl
def pyskick_register_methods(register: RegisterMethod) -> None:
    register(
        ONE_VIEW,
        label="The pretrained one-view model, one glimpse",
        role="one-view",
        position=0,
    )
    register(
        "rnd-actions",
        label="Random motions; only the reconstruction trains",
        actor="random",
        role="reference",
        position=1,
    )
    register("ltla", label="Look-around policy without a sidekick", role="reference", position=3)
    register(
        "asymm-ac",
        label="Learned critic that sees the whole grid (asymmetric actor-critic)",
        critic="asymm-critic",
        position=4,
    )
    register(
        "ours(rew)",
        label="Reward shaping from one-view scores (the rew sidekick)",
        sidekick="rew",
        role="sidekick",
        position=6,
    )
    register(
        "ours(demo)",
        label="Greedy coverage demonstrations (the demo sidekick)",
        sidekick="demo",
        role="sidekick",
        position=7,
    )
    register(
        "ours(rew)+ac",
        label="Ours(rew) with a learned critic",
        critic="critic",
        sidekick="rew",
        role="sidekick",
        position=8,
    )
    register(
        "ours(demo)+ac",
        label="Ours(demo) with a learned critic",
        critic="critic",
        sidekick="demo",
        role="sidekick",
        position=9,
    )
    register(
        "demo-actions",
        label="The demo sidekick's greedy motions at test time too (full observability)",
        actor="demo-actions",
        position=10,
    )
