"""Methods: the rows of the paper's Table 1 as data that plugins add to.

A bottom-layer module (no torch, no other pyskick import), like :mod:`pyskick.options`: the
registry and plugins' hook modules read it without importing the experiment code.

A method says what one row trains: the actor that picks the motions, the critic of its policy
gradient, the sidekick that helps it and that sidekick's options, all as registered names. Every
trained row starts from the same pretrained one-view model (the ``one-view`` row, evaluated with
one glimpse; docs/paper-reference.md §4.1, §6), so a method has no initialisation of its own. Its
``role`` tells the report how to compare it (:data:`ROLES`). Plugins register methods with the
``pyskick_register_methods`` hook (:mod:`pyskick.hookspecs`); ``pyskick reproduce --methods``
and ``pyskick plugins`` list them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, get_args

ONE_VIEW = "one-view"
"""The pretrained one-view model's row: every other row trains from it and is compared with it."""

Role = Literal["one-view", "reference", "sidekick", "baseline"]
ROLES: tuple[str, ...] = get_args(Role)
"""How the report treats a row (:mod:`pyskick.experiments.table`,
:mod:`pyskick.experiments.claims`):

- ``"one-view"``: the pretrained model itself (only the ``one-view`` row); every row is
  compared with it, paired;
- ``"reference"``: a row every other row is compared with, paired (ltla, rnd-actions): the
  paper's claims rest on ltla's and rnd-actions' comparisons;
- ``"sidekick"``: a method the paper proposes (``ours(...)``, or a plugin's row that says so):
  the report checks that it beats rnd-actions and ltla and states the claims "<row> beats
  ltla" and "<row> learns faster than ltla" with their verdicts;
- ``"baseline"``: any other row (asymm-ac, demo-actions, ...): compared with the references, no
  claim checked beyond beating one-view.
"""

DEFAULT_POSITION = 100
"""Where a row goes when its registration names no position: after the paper's rows, which
take their Table 1 index (0 to 10)."""


@dataclass(frozen=True)
class Method:
    """One row of Table 1.

    Attributes:
        name: the row's name (``"ours(rew)+ac"``): what ``--methods`` takes, the run folders'
            name and the table's first column.
        label: one line saying what the row is (``pyskick plugins`` shows it).
        actor: registered actor name (``TrainConfig.actor``).
        critic: registered critic name (``TrainConfig.critic``).
        sidekick: registered sidekick name (``TrainConfig.sidekick``).
        sidekick_options: options of that sidekick this row fixes (``{"k": 2}``): values as
            ``--sidekick-option`` takes them; options given to ``reproduce`` still win.
        role: how the report compares the row (:data:`ROLES`).
        position: rows are listed and tabulated by ``(position, name)``; the paper's rows use
            their Table 1 index, a new row defaults to :data:`DEFAULT_POSITION`.
        plugin: the plugin that registered the row (set by the registry).
    """

    name: str
    label: str
    actor: str = "learned"
    critic: str = "average"
    sidekick: str = "none"
    sidekick_options: Mapping[str, int | float | bool | str] = field(default_factory=dict)
    role: Role = "baseline"
    position: int = DEFAULT_POSITION
    plugin: str = ""

    def __post_init__(self) -> None:
        owner = f"method {self.name!r}" + (f" (plugin {self.plugin!r})" if self.plugin else "")
        if not isinstance(self.name, str) or not self.name or self.name != self.name.strip():
            raise ValueError(f"invalid method name {self.name!r}")
        if any(c in self.name for c in "/\\,") or self.name in (".", ".."):
            # The name is a folder of the reproduce output and an item of --methods a,b.
            raise ValueError(f"{owner}: a method name has no '/', '\\' or ','")
        if not isinstance(self.label, str) or not self.label.strip():
            raise ValueError(f"{owner}: label must be a non-empty string")
        for kind in ("actor", "critic", "sidekick"):
            value = getattr(self, kind)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{owner}: {kind} must be a registered name, got {value!r}")
        if self.role not in ROLES:
            raise ValueError(f"{owner}: role must be one of {', '.join(ROLES)}, got {self.role!r}")
        if (self.role == "one-view") != (self.name == ONE_VIEW):
            raise ValueError(f"{owner}: only the {ONE_VIEW!r} row has role 'one-view'")
        if isinstance(self.position, bool) or not isinstance(self.position, int):
            raise TypeError(f"{owner}: position must be an int, got {self.position!r}")
        options = self.sidekick_options
        if not isinstance(options, Mapping) or not all(
            isinstance(key, str) and isinstance(value, int | float | bool | str)
            for key, value in options.items()
        ):
            raise TypeError(
                f"{owner}: sidekick_options must map option names to int, float, bool or str "
                f"values, got {options!r}"
            )
        if options and self.role == "one-view":
            raise ValueError(f"{owner}: the one-view row trains no sidekick")
        object.__setattr__(self, "sidekick_options", MappingProxyType(dict(options)))

    @property
    def trained(self) -> bool:
        """False for ``one-view`` (the pretrained model: no policy training)."""
        return self.role != "one-view"

    @property
    def aliases(self) -> tuple[str, ...]:
        """Methods have no aliases (the name is a folder name)."""
        return ()

    @property
    def summary(self) -> str:
        """The label and what the row trains, for listings."""
        if not self.trained:
            return f"{self.label} (pretrained, T = 1; role one-view)"
        options = ", ".join(f"{k}={v}" for k, v in sorted(self.sidekick_options.items()))
        sidekick = self.sidekick + (f" [{options}]" if options else "")
        return (
            f"{self.label} (actor {self.actor}, critic {self.critic}, sidekick {sidekick}; "
            f"role {self.role})"
        )
