"""Every code block of README.md and docs/*.md runs, in order, as written (issue 26).

**What runs.** Fenced blocks whose language is ``bash``, ``sh``, ``console`` or ``python``. In a
``console`` block only the lines after a ``$`` prompt are commands; the rest is output. Every
other block (``text``, ``toml``, ``cpp``, no language: usage synopses, outputs, file listings,
excerpts of configuration) is shown, not run.

**How.** One test per file. Its blocks run in the order of the file in one fresh working
directory, so a block reads what earlier blocks of the same file wrote (a data file, a run
folder). Bash blocks run with ``bash -Eeuo pipefail``, Python blocks with the virtual
environment's interpreter, each a script file of its own in that directory (run, then removed).
A block that fails fails the test with the file, the line of the failing command, the command
and the tail of its stderr; the blocks after it still run (and may fail because of it). The
files run side by side, two at a time. The environment: the venv's ``bin`` first on
``PATH`` (``pyskick`` is the checkout's), ``PYSKICK_CACHE_DIR`` and ``PYSKICK_DATA_DIR`` in the
test's temporary folder, ``PYSKICK_PROGRESS=lines``, ``OMP_NUM_THREADS=1`` (torch on one
thread), ``MPLBACKEND=Agg``; other ``PYSKICK_*`` variables are removed but for the test
kit's ``PYSKICK_AUTO_DEVICE`` (``device="auto"`` on the CPU). The rest of the environment is
the test's, ``PYTHONPATH`` included: where packages are installed there (a GPU machine's
carried wheels, under ``--target``), the blocks find them as a user's shell would.

**Inputs a user brings.** Provided in every working directory whose file names them:

- ``$PYSKICK_DATA_DIR`` holds tiny stand-ins of the built-in datasets under the cache names of
  their default sizes (``synthetic-scenes``: 48 scenes, ``synthetic-objects``: 40 objects), so a
  block that names ``--dataset synthetic-scenes`` trains on 48 scenes, not 2,000;
- ``my-panoramas/`` and ``shared/data/panoramas/``: equirectangular PNG panoramas (2:1), and
  ``my-meshes/``: OBJ meshes in class folders (``chair``, ``table``, ``bed``, ``sofa``,
  ``lamp``), all generated;
- ``.venv``: a link to the checkout's virtual environment, for blocks written for the checkout's
  root (``.venv/bin/pyskick``).

**Sizes.** The commands are the docs' own, made tiny: :data:`SUBSTITUTIONS` rewrite the sizes
they give and :data:`ADDITIONS` add sizes to commands whose defaults are large (each command of
a bash or console block); :data:`PYTHON_SUBSTITUTIONS` do the same in Python blocks. Every
other difference between the text and what runs is a marker in the Markdown.

**Markers.** An HTML comment alone on the line before a fence (blank lines may come
between):

- ``<!-- docs-test: skip: REASON -->``: the block is not run (needs a GPU, the network, is an
  excerpt of a file, ...); the test reports it with its reason, and a skip without a reason,
  on a block that would not run anyway, or a marker before no fence is an error;
- ``<!-- docs-test: write PATH -->``: the block's text is written to ``PATH`` in the working
  directory (a TOML file that a later block passes to ``--config``) instead of being run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from pyskick.testing import AUTO_DEVICE_ENV

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
VENV_BIN = Path(sys.executable).parent
RUN_LANGUAGES = {"bash": "bash", "sh": "bash", "console": "console", "python": "python"}
BLOCK_TIMEOUT_S = 300
STDERR_TAIL = 15
# Files run side by side: each block is one single-threaded process.
WORKERS = min(2, os.cpu_count() or 1)


def _at_most(limit: int) -> Callable[[re.Match[str]], str]:
    return lambda m: f"{m.group(1)} {min(int(m.group(2)), limit)}"


# (what, pattern, replacement): applied in this order to every command of a bash or console
# block; the replacement is a string or a function of the match. A command's words are
# matched, so `--num 4` (a preview's count) stays as it is and `--num-test` is never touched.
SUBSTITUTIONS: list[tuple[str, str, str | Callable[[re.Match[str]], str]]] = [
    ("data sizes: at most 48 viewgrids", r"(--num) (\d+)\b", _at_most(48)),
    ("one epoch", r"(--epochs|--pretrain-epochs) (\d+)\b", lambda m: f"{m.group(1)} 1"),
    # Four: a power plan's pilot needs them (pyskick.experiments.power_plan.MIN_PILOT_SEEDS).
    ("at most four seeds", r"(--seeds) (\d+)\b", _at_most(4)),
    ("the cpu-demo model", r"--preset paper-(sun360|modelnet)\b", "--preset cpu-demo"),
    ("packs of 1 and 2 runs, 1 timed step", r"--runs [\d,]+", "--runs 1,2 --steps 1"),
    ("two processes", r"(--nproc-per-node) (\d+)\b", _at_most(2)),
]
# Options added to a command that does not give them (its defaults are sized for real work:
# `data make` 2,000 scenes, `cpu-demo` 3 + 3 epochs, `reproduce` 3 seeds of every method and a
# report of figures, the demo 800 scenes and 18 seeds of 4 methods, `visualize` 3 examples).
# The demo still draws its report.
ADDITIONS: dict[str, list[str]] = {
    "pyskick data make": ["--num 48"],
    "pyskick pretrain": ["--epochs 1"],
    "pyskick train": ["--epochs 1"],
    "pyskick reproduce": ["--epochs 1", "--pretrain-epochs 1", "--seeds 1", "--no-report"],
    "pyskick demo": [
        "--num 48",
        "--seeds 1",
        "--pretrain-epochs 1",
        "--epochs 1",
        "--methods ltla",
    ],
    "pyskick visualize": ["--examples 1"],
}
# The same for Python blocks, line by line.
PYTHON_SUBSTITUTIONS: list[tuple[str, str, str]] = [
    ("a few PPO steps", r"\btotal_timesteps=\d+", "total_timesteps=256"),
]

MARKER = re.compile(r"\s*<!--\s*docs-test\b(?P<body>.*?)-->\s*")  # alone on its line
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass
class Block:
    """A fenced block of a Markdown file."""

    doc: str
    line: int  # of the opening fence, 1-based
    language: str
    text: str  # dedented to the fence's indentation
    skip: str | None = None  # the reason
    write: str | None = None  # the path to write the text to

    @property
    def runnable(self) -> bool:
        return self.language in RUN_LANGUAGES

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


class MarkerError(ValueError):
    """A docs-test marker that cannot be honoured."""


def parse_blocks(doc: str, text: str) -> list[Block]:
    """The fenced blocks of ``text`` with their markers; MarkerError for a bad marker."""
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: tuple[int, str] | None = None  # (line, body) of a marker waiting for its fence

    def stray() -> MarkerError:
        assert pending is not None
        return MarkerError(f"{doc}:{pending[0]}: a docs-test marker must come right before a fence")

    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            found = MARKER.fullmatch(lines[index])
            if found or lines[index].strip():
                if pending is not None:
                    raise stray()
                if found:
                    pending = (index + 1, found.group("body"))
            index += 1
            continue
        start, indent, mark = index + 1, fence.group("indent"), fence.group("fence")
        language = (fence.group("info").strip().split() or [""])[0].lower()
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = lines[index].strip()
            if closing.startswith(mark) and not closing.strip(mark[0]):
                break
            raw = lines[index]
            body.append(raw[len(indent) :] if raw.startswith(indent) else raw.lstrip())
            index += 1
        block = Block(doc, start, language, "".join(f"{line}\n" for line in body))
        if pending is not None:
            _apply_marker(block, *pending)
            pending = None
        blocks.append(block)
        index += 1
    if pending is not None:
        raise stray()
    return blocks


def _apply_marker(block: Block, line: int, body: str) -> None:
    body = " ".join(body.split())
    body = body[1:].strip() if body.startswith(":") else f"(no colon) {body}"
    skip = re.fullmatch(r"skip\s*(?::\s*(?P<reason>.*))?", body)
    write = re.fullmatch(r"write\s+(?P<path>\S+)", body)
    if skip:
        if not skip.group("reason"):
            raise MarkerError(f"{block.doc}:{line}: 'docs-test: skip' needs a reason")
        if not block.runnable:
            language = block.language or "plain"
            raise MarkerError(f"{block.doc}:{line}: skips a {language} block, which is not run")
        block.skip = skip.group("reason")
    elif write:
        block.write = write.group("path")
    else:
        raise MarkerError(
            f"{block.doc}:{line}: unknown docs-test marker {body!r} "
            "(expected 'skip: REASON' or 'write PATH')"
        )


def load_blocks(doc: str) -> list[Block]:
    return parse_blocks(doc, (ROOT / doc).read_text(encoding="utf-8"))


# --- Turning a block into what runs ---------------------------------------------------------


def _split_comment(line: str) -> tuple[str, str]:
    """``(code, comment)`` of a shell line: the comment starts at a ``#`` after a blank,
    outside quotes."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i:]
    return line, ""


def _commands(lines: list[str]) -> list[tuple[int, int]]:
    """``(first, last)`` 0-based line ranges of the logical commands (``\\`` continues)."""
    ranges: list[tuple[int, int]] = []
    first = None
    for i, line in enumerate(lines):
        code = _split_comment(line)[0].rstrip()
        if first is None:
            if not code.strip():
                continue
            first = i
        if not code.endswith("\\"):
            ranges.append((first, i))
            first = None
    if first is not None:
        ranges.append((first, len(lines) - 1))
    return ranges


def shrink(lines: list[str]) -> list[str]:
    """The lines of a shell script with :data:`SUBSTITUTIONS` and :data:`ADDITIONS` applied,
    line for line (a command's line numbers do not move)."""
    out = []
    for line in lines:
        code, comment = _split_comment(line)
        for _, pattern, replacement in SUBSTITUTIONS:
            code = re.sub(pattern, replacement, code)
        out.append(code + comment)
    for first, last in _commands(out):
        words = " ".join(_split_comment(line)[0].rstrip(" \\") for line in out[first : last + 1])
        for command, options in ADDITIONS.items():
            if not re.search(rf"(^|\s){re.escape(command)}\b", words):
                continue
            missing = [
                option
                for option in options
                if not re.search(rf"(^|\s){re.escape(option.split()[0])}(\s|=|$)", words)
            ]
            if missing:
                code, comment = _split_comment(out[last])
                out[last] = f"{code.rstrip()} {' '.join(missing)} {comment}".rstrip()
    return out


def shell_script(block: Block) -> list[str]:
    """The block's lines as a bash script, line for line: a console block's output lines are
    blank and its ``$`` prompts removed."""
    lines = block.text.splitlines()
    if block.language == "console":
        script, continued = [], False
        for line in lines:
            if continued or line.startswith("$ "):
                command = line if continued else line[2:]
                script.append(command)
                continued = _split_comment(command)[0].rstrip().endswith("\\")
            else:
                script.append("")
        lines = script
    return shrink(lines)


# --- Running ---------------------------------------------------------------------------------

TRAP = "trap 'echo \"docs-test: exit $? at line $LINENO\" >&2' ERR"


@dataclass
class Outcome:
    block: Block
    status: str  # "ran", "skipped", "written", "shown"
    seconds: float = 0.0


class BlockFailed(AssertionError):
    pass


def _tail(text: str, lines: int = STDERR_TAIL) -> str:
    """The last lines of a stderr, after the one-line errors above them (torchrun buries its
    ranks' errors under its own report)."""
    kept = [line for line in text.splitlines() if not line.startswith("docs-test: exit")]
    errors = list(dict.fromkeys(line for line in kept[:-lines] if line.startswith("Error:")))
    shown = [*errors[:3], "..."] if errors else []
    shown += kept[-lines:]
    return "\n".join(f"    {line}" for line in shown) or "    (nothing on stderr)"


def run_block(block: Block, work: Path, env: dict[str, str]) -> None:
    """Run one block in ``work``; BlockFailed naming the failing line, command and stderr."""
    source = None
    if block.language == "python":
        # A file in the working directory, as a user's script (spawned workers import it).
        source = work / f".docs-test-{block.line}.py"
        script = block.text.splitlines()
        for _, pattern, replacement in PYTHON_SUBSTITUTIONS:
            script = [re.sub(pattern, replacement, line) for line in script]
        source.write_text("\n".join(script) + "\n", encoding="utf-8")
        argv, stdin = [sys.executable, source.name], None
    else:
        script = shell_script(block)
        argv, stdin = ["bash", "-Eeuo", "pipefail", "-s"], "\n".join([TRAP, *script]) + "\n"
    try:
        done = subprocess.run(
            argv,
            input=stdin,
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        raise BlockFailed(
            f"{block.where}: {block.language} block ran over {BLOCK_TIMEOUT_S} s\n{_tail(err)}"
        ) from None
    finally:
        if source is not None:
            source.unlink()
    if done.returncode == 0:
        return
    if source is not None:
        lines = re.findall(rf'File "[^"]*{re.escape(source.name)}", line (\d+)', done.stderr)
        at = int(lines[-1]) if lines else 1
        first, last = at - 1, at - 1
    else:
        lines = re.findall(r"docs-test: exit \d+ at line (\d+)", done.stderr)
        at = int(lines[-1]) - 1 if lines else 1  # the trap is the script's line 1
        first, last = next(
            ((a, b) for a, b in _commands(script) if a <= at - 1 <= b), (at - 1, at - 1)
        )
    command = "\n".join(f"    {line}" for line in script[max(first, 0) : last + 1])
    raise BlockFailed(
        f"{block.doc}:{block.line + first + 1}: {block.language} block of line {block.line} "
        f"failed (exit {done.returncode}):\n{command}\n  stderr (last lines):\n{_tail(done.stderr)}"
    )


def block_env(tmp: Path, data_dir: Path) -> dict[str, str]:
    # The user's PYSKICK_* settings left out, but for what "auto" means (the test kit's CPU).
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYSKICK_") or key == AUTO_DEVICE_ENV
    }
    env.update(
        PATH=os.pathsep.join([str(VENV_BIN), env.get("PATH", "")]),
        VIRTUAL_ENV=str(VENV_BIN.parent),
        PYSKICK_CACHE_DIR=str(tmp / "cache"),
        PYSKICK_DATA_DIR=str(data_dir),
        PYSKICK_PROGRESS="lines",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        MPLBACKEND="Agg",
        SB3_LOGDIR=str(tmp / "sb3"),
    )
    return env


@dataclass
class DocRun:
    """What running one file's blocks gave."""

    doc: str
    outcomes: list[Outcome]
    failures: list[str]
    seconds: float

    def summary(self) -> str:
        counts = {
            status: sum(o.status == status for o in self.outcomes)
            for status in ("ran", "failed", "skipped", "written", "shown")
        }
        lines = [
            f"{self.doc}: {counts['ran']} blocks ran, {counts['failed']} failed, "
            f"{counts['skipped']} skipped, {counts['written']} written to files, "
            f"{counts['shown']} shown (not code), in {self.seconds:.1f} s"
        ]
        for o in self.outcomes:
            if o.status in ("ran", "failed"):
                detail = f"{o.seconds:.1f} s"
            else:
                detail = o.block.skip or o.block.write or ""
            lines.append(
                f"  line {o.block.line}: {o.block.language or 'plain'} {o.status} {detail}"
            )
        return "\n".join(lines)


def run_doc(doc: str, tmp: Path, data_dir: Path) -> DocRun:
    """Run the blocks of ``doc`` in order in ``tmp/work``. A failed block is recorded and the
    next ones still run (they may then fail because of it)."""
    started = time.perf_counter()
    blocks = load_blocks(doc)
    work = tmp / "work"
    work.mkdir(parents=True)
    provide_inputs(work, "".join(b.text for b in blocks if b.runnable and not b.skip))
    env = block_env(tmp, data_dir)
    outcomes, failures = [], []
    for block in blocks:
        if block.write:
            target = work / block.write
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            outcomes.append(Outcome(block, "written"))
        elif not block.runnable:
            outcomes.append(Outcome(block, "shown"))
        elif block.skip:
            outcomes.append(Outcome(block, "skipped"))
        else:
            began = time.perf_counter()
            try:
                run_block(block, work, env)
            except BlockFailed as exc:
                failures.append(str(exc))
                outcomes.append(Outcome(block, "failed", time.perf_counter() - began))
            else:
                outcomes.append(Outcome(block, "ran", time.perf_counter() - began))
    return DocRun(doc, outcomes, failures, time.perf_counter() - started)


# --- Inputs a user brings ----------------------------------------------------------------------


def write_panoramas(folder: Path, count: int) -> None:
    """``count`` smooth random equirectangular PNGs, 128 x 64."""
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for k in range(count):
        coarse = rng.integers(0, 256, size=(4, 8, 3), dtype=np.uint8)
        image = Image.fromarray(coarse).resize((128, 64), Image.Resampling.BILINEAR)
        image.save(folder / f"panorama{k}.png")


def write_meshes(folder: Path) -> None:
    """Boxes of different proportions as OBJ files, one folder per class."""
    shapes = {
        "chair/chair1.obj": (0.5, 1.0, 0.5),
        "chair/chair2.obj": (0.6, 0.9, 0.5),
        "table/table1.obj": (1.2, 0.7, 0.8),
        "table/table2.obj": (1.0, 0.7, 1.0),
        "bed/bed1.obj": (1.0, 0.5, 2.0),
        "sofa/sofa1.obj": (2.0, 0.8, 0.9),
        "lamp/lamp1.obj": (0.3, 1.5, 0.3),
    }
    corners = [(x, y, z) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]
    faces = [(1, 2, 4, 3), (5, 7, 8, 6), (1, 5, 6, 2), (3, 4, 8, 7), (1, 3, 7, 5), (2, 6, 8, 4)]
    for name, (w, h, d) in shapes.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        vertices = [f"v {x * w / 2:g} {y * h / 2:g} {z * d / 2:g}" for x, y, z in corners]
        path.write_text("\n".join(vertices + [f"f {a} {b} {c} {e}" for a, b, c, e in faces]) + "\n")


INPUTS: dict[str, Callable[[Path], None]] = {
    "my-panoramas": lambda path: write_panoramas(path, 6),
    "shared/data/panoramas": lambda path: write_panoramas(path, 8),
    "my-meshes": write_meshes,
}


def provide_inputs(work: Path, text: str) -> None:
    """The inputs of :data:`INPUTS` that ``text`` names, and the ``.venv`` link."""
    for name, make in INPUTS.items():
        if re.search(rf"(?<![\w/.-]){re.escape(name)}\b", text):
            make(work / name)
    (work / ".venv").symlink_to(VENV_BIN.parent, target_is_directory=True)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``$PYSKICK_DATA_DIR`` with tiny stand-ins of the built-in datasets at their default
    cache names."""
    from pyskick.data.builtin import BUILTIN_DATASETS, cache_file_name, make_builtin

    folder = tmp_path_factory.mktemp("datasets")
    sizes = {"synthetic-scenes": 48, "synthetic-objects": 40}
    for name, (generate, num, seed) in BUILTIN_DATASETS.items():
        make_builtin(name, folder / cache_file_name(name, generate, num, seed), sizes[name], seed)
    return folder


# --- The tests -------------------------------------------------------------------------------


def test_markers_are_valid() -> None:
    """Every marker is well formed and stands before a block it applies to; the skips are
    listed with their reasons (``pytest -rP``)."""
    errors, skips = [], []
    for doc in DOCS:
        try:
            skips += [f"{b.where}: {b.skip}" for b in load_blocks(doc) if b.skip]
        except MarkerError as exc:
            errors.append(str(exc))
    assert not errors, "\n".join(errors)
    print(f"{len(skips)} blocks skipped:", *skips, sep="\n  ")


def test_the_markers_are_checked() -> None:
    good = "<!-- docs-test: skip: needs a GPU -->\n\n```bash\nnvidia-smi\n```\n"
    (block,) = parse_blocks("x.md", good)
    assert (block.line, block.skip, block.text) == (3, "needs a GPU", "nvidia-smi\n")
    bad = {
        "<!-- docs-test: skip -->\n```bash\nls\n```\n": "needs a reason",
        "<!-- docs-test: skip:   -->\n```bash\nls\n```\n": "needs a reason",
        "<!-- docs-test: skip: why -->\n```text\nls\n```\n": "which is not run",
        "<!-- docs-test: skip: why -->\ntext\n```bash\nls\n```\n": "right before a fence",
        "<!-- docs-test: run -->\n```bash\nls\n```\n": "unknown docs-test marker",
        "<!-- docs-test skip: why -->\n```bash\nls\n```\n": "unknown docs-test marker",
    }
    for text, message in bad.items():
        with pytest.raises(MarkerError, match=message):
            parse_blocks("x.md", text)
    prose = "Mark it with `<!-- docs-test: skip: why -->`.\n\n```bash\nls\n```\n"
    assert parse_blocks("x.md", prose)[0].skip is None  # quoted in a sentence: no marker
    (toml,) = parse_blocks(
        "x.md", "<!-- docs-test: write a/b.toml -->\n  ```toml\n  x = 1\n  ```\n"
    )
    assert (toml.write, toml.text) == ("a/b.toml", "x = 1\n")


def test_the_sizes_are_substituted() -> None:
    script = [
        "pyskick data make synthetic-scenes --out s.h5 --num 2000   # --num 2000",
        "pyskick data preview s.h5 --num 4 --out p.png",
        "pyskick reproduce --dataset s.h5 --preset paper-sun360 --epochs 30 \\",
        "    --pretrain-epochs 20 --seeds 3 --num-test 100",
        "torchrun --nproc-per-node 4 -m pyskick train --out r",
        "pyskick demo --out runs/demo --seeds 2   # sized for 2 cores",
    ]
    assert shrink(script) == [
        "pyskick data make synthetic-scenes --out s.h5 --num 48   # --num 2000",
        "pyskick data preview s.h5 --num 4 --out p.png",
        "pyskick reproduce --dataset s.h5 --preset cpu-demo --epochs 1 \\",
        "    --pretrain-epochs 1 --seeds 3 --num-test 100 --no-report",
        "torchrun --nproc-per-node 2 -m pyskick train --out r --epochs 1",
        "pyskick demo --out runs/demo --seeds 2 --num 48 --pretrain-epochs 1 --epochs 1 "
        "--methods ltla # sized for 2 cores",
    ]


def test_a_failing_block_names_its_line_and_stderr(tmp_path: Path) -> None:
    env = block_env(tmp_path, tmp_path / "datasets")
    text = "# a comment\necho ok\nls \\\n  no-such-file   # fails\necho never\n"
    shell = Block("x.md", 10, "bash", text)
    with pytest.raises(BlockFailed) as failed:
        run_block(shell, tmp_path, env)
    message = str(failed.value)
    assert message.startswith("x.md:13: bash block of line 10 failed (exit 2):")
    assert "    ls \\\n      no-such-file   # fails" in message
    assert "cannot access 'no-such-file'" in message
    python = Block("x.md", 20, "python", "import sys\n\nraise SystemExit(sys.argv[5])\n")
    with pytest.raises(BlockFailed, match=r"^x\.md:23: python block of line 20 failed \(exit 1\)"):
        run_block(python, tmp_path, env)
    console = Block("x.md", 30, "console", "$ echo one \\\n  two\none two\n$ false\n")
    assert shell_script(console) == ["echo one \\", "  two", "", "false"]
    with pytest.raises(BlockFailed, match=r"^x\.md:34: console block"):
        run_block(console, tmp_path, env)


@pytest.fixture(scope="session")
def doc_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, data_dir: Path
) -> Iterator[dict[str, Future[DocRun]]]:
    """The selected files' runs, started together on :data:`WORKERS` threads (each waits on
    one block's process at a time), README.md first: the longest."""
    docs = [
        item.callspec.params["doc"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_doc_blocks_run"
    ]
    folders = {doc: tmp_path_factory.mktemp(re.sub(r"\W", "-", doc)) for doc in docs}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        runs = {doc: pool.submit(run_doc, doc, folders[doc], data_dir) for doc in docs}
        yield runs
        for future in runs.values():
            future.cancel()


@pytest.mark.parametrize("doc", DOCS)
def test_doc_blocks_run(doc: str, doc_runs: dict[str, Future[DocRun]]) -> None:
    """The runnable blocks of ``doc`` run in order in one working directory."""
    run = doc_runs[doc].result()
    print(run.summary())
    if run.failures:
        pytest.fail("\n\n".join(run.failures), pytrace=False)
