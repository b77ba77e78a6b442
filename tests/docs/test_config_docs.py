"""docs/training.md's configuration reference names every field of ``TrainConfig``, and its two
lists of the runtime fields are ``config.RUNTIME_FIELDS``: the lists had fallen behind the
code twice before this test."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pyskick.config import RUNTIME_FIELDS, TrainConfig

TRAINING = Path(__file__).resolve().parents[2] / "docs" / "training.md"


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_configuration_table_has_a_row_for_every_field() -> None:
    table = _section(TRAINING.read_text(), "Configuration (`TrainConfig`)")
    # A row's first cell names one field or two (`epochs` / `pretrain_epochs`, `lr`, `...`).
    cells = re.findall(r"^\| ([^|]+) \|", table, flags=re.MULTILINE)
    rows = {name for cell in cells for name in re.findall(r"`(\w+)`", cell)}
    fields = {field.name for field in dataclasses.fields(TrainConfig)}
    assert fields - rows == set()
    assert rows - fields == set()


def _named_before(text: str, anchor: str) -> set[str]:
    """The backquoted names of the sentence that ends at ``anchor``."""
    end = text.index(anchor)
    start = max(text.rfind(".", 0, end), text.rfind("\n\n", 0, end))
    return set(re.findall(r"`(\w+)`", text[start:end]))


def _named_after(text: str, anchor: str) -> set[str]:
    """The backquoted names of the parenthesis that ``anchor`` opens."""
    start = text.index(anchor) + len(anchor)
    return set(re.findall(r"`(\w+)`", text[start : text.index(";", start)]))


def test_both_lists_of_the_runtime_fields_are_the_runtime_fields() -> None:
    text = TRAINING.read_text()
    assert _named_before(text, "(`config.RUNTIME_FIELDS`) decide") == set(RUNTIME_FIELDS)
    assert _named_after(text, "(`config.RUNTIME_FIELDS`:") == set(RUNTIME_FIELDS)
