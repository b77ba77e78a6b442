"""A pytest plugin for the GPU check's whole-suite step: every failure written the moment it is
reported (``-p instafail``, file in ``$INSTAFAIL``), so that a run stopped by its time limit
still names its failures (pytest prints its summary only at the end)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under xdist the controller sees every worker's reports: written once, there.
    if not report.failed or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    with Path(os.environ.get("INSTAFAIL", "instafail.txt")).open("a") as f:
        f.write(f"=== FAILED {report.nodeid} ({report.when})\n{str(report.longrepr)[-2500:]}\n")
