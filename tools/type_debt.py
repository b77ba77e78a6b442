"""Recount mypy's type debt: the modules excused from some error codes in pyproject.toml.

    .venv/bin/python tools/type_debt.py          # rewrite the list between the markers
    .venv/bin/python tools/type_debt.py --check  # exit 1 when the list is not the recount

mypy runs with [tool.mypy] as it is but without the list, so every module that fails a check
is listed with the error codes it fails and their counts; a fixed module drops out. Then mypy
runs with the new list until it passes (excusing a code can leave a ``type: ignore`` unused).
The comment on ``warn_return_any`` gets the count of returns it lets through. Run it after
fixing type errors (the list shrinks); a new error is better fixed than excused.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
BEGIN = "  # TYPE_DEBT_BEGIN\n"
END = "  # TYPE_DEBT_END\n"
ERROR = re.compile(r"^(\S+\.pyi?):\d+: error: .*\[([a-z-]+)\]$")
RETURN_ANY = re.compile(r"\(\d+ such returns in \d+ modules\)")

Debt = dict[str, collections.Counter[str]]


def run_mypy(config_text: str, cache_dir: Path) -> tuple[Debt, str]:
    """mypy's errors per module and error code under ``config_text``, and its summary line."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", dir=cache_dir, delete=False) as f:
        f.write(config_text)
    mypy = Path(sys.executable).with_name("mypy")
    out = subprocess.run(
        [str(mypy), "--config-file", f.name, "--cache-dir", str(cache_dir / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    debt: Debt = collections.defaultdict(collections.Counter)
    for line in out.splitlines():
        match = ERROR.match(line)
        if match:
            debt[module_name(match.group(1))][match.group(2)] += 1
    summary = out.strip().splitlines()[-1] if out.strip() else "(no output)"
    return debt, summary


def module_name(path: str) -> str:
    """``pyskick/a/b.py`` -> ``pyskick.a.b``; ``cli/pyskick_cli/x.py`` -> ``pyskick_cli.x``."""
    name = path.rsplit(".", 1)[0].replace("/", ".").removeprefix("cli.")
    return name.removesuffix(".__init__")


def with_debt(text: str, debt: Debt) -> str:
    """``text`` (pyproject.toml) with ``debt`` written between the markers."""
    begin = text.index(BEGIN) + len(BEGIN)
    end = text.index(END)
    lines = []
    total = 0
    for module in sorted(debt):
        counts = debt[module]
        n = sum(counts.values())
        total += n
        detail = ", ".join(
            f"{code} {count}" for code, count in sorted(counts.items(), key=lambda c: (-c[1], c[0]))
        )
        codes = ", ".join(f'"{code}"' for code in sorted(counts))
        lines.append(f"  # {n} error{'s' if n > 1 else ''}: {detail}\n")
        lines.append(f'  {{ module = "{module}", disable_error_code = [{codes}] }},\n')
    header = (
        [
            f"  # Type debt: {len(debt)} modules fail checks that every other module passes,\n",
            f"  # each excused from those error codes only ({total} errors in all, counted\n",
            "  # by tools/type_debt.py). Fix a module's errors, then rerun it: the list shrinks.\n",
        ]
        if debt
        else []
    )
    return text[:begin] + "".join(header + lines) + text[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = parser.parse_args()
    text = PYPROJECT.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = Path(tmp)
        bare = with_debt(text, {})
        debt, summary = run_mypy(bare, cache_dir)
        print(f"without the list: {summary}")
        returns, _ = run_mypy(
            bare.replace("warn_return_any = false", "warn_return_any = true"), cache_dir
        )
        n_returns = sum(c["no-any-return"] for c in returns.values())
        n_modules = sum(1 for c in returns.values() if c["no-any-return"])
        for _ in range(5):
            new = with_debt(text, debt)
            more, summary = run_mypy(new, cache_dir)
            print(f"with the list: {summary}")
            if not more:
                break
            for module, counts in more.items():
                debt.setdefault(module, collections.Counter()).update(counts)
        else:
            print("mypy still fails with the list", file=sys.stderr)
            return 1
    new = RETURN_ANY.sub(f"({n_returns} such returns in {n_modules} modules)", new)
    if args.check:
        if new != text:
            print("pyproject.toml's type debt is not the recount: run tools/type_debt.py")
            return 1
        return 0
    PYPROJECT.write_text(new, encoding="utf-8")
    print(f"{len(debt)} modules, {sum(sum(c.values()) for c in debt.values())} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
