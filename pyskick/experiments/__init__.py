"""Experiments: the paper's Table 1 on one dataset (``pyskick reproduce`` and ``pyskick demo``).

::

    from pyskick.experiments import reproduce

    result = reproduce("scenes.h5", "runs/table1", preset="cpu-demo", methods=["ltla"])
    print(result.out_dir / "table.md", result.index)

See ``docs/reproduce.md``.
"""

from __future__ import annotations

from pyskick.experiments.claims import OrderingCheck, ordering_checks
from pyskick.experiments.report import write_report
from pyskick.experiments.reproduce import ReproduceResult, reproduce
from pyskick.experiments.selection import (
    ONE_VIEW,
    Method,
    available_methods,
    check_available,
    method_names,
    missing_plugins,
    registered_methods,
    select_methods,
)
from pyskick.experiments.table import build_table, format_table

__all__ = [
    "ONE_VIEW",
    "Method",
    "OrderingCheck",
    "ReproduceResult",
    "available_methods",
    "build_table",
    "check_available",
    "format_table",
    "method_names",
    "missing_plugins",
    "ordering_checks",
    "registered_methods",
    "reproduce",
    "select_methods",
    "write_report",
]
