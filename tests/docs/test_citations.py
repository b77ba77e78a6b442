"""Every citation in the repository resolves to a document in the repository.

A citation names a document (a path ending in ``.md``) and may name a part of it: a section
number (``docs/paper-reference.md §5.2``, a range ``§5.1–5.2``, ``§8.14`` for item 14 of its §8
checklist), a heading in quotes (``docs/reproduce.md, "The demo"``), a deviation id
(``docs/deviations.md K6``) or an anchor (``paper-reference.md#s5.2``). The paper is cited as
``paper §3.3.1`` or ``paper Eq. 10``, with the numbers listed in docs/paper-reference.md §0.1.

A § number takes its source from the same sentence (or table cell): the last document named
before it, or ``paper`` directly before it (and the § numbers chained to that one by commas or
"and"). A § number with no source in its sentence refers to the document its file declares with
"Section numbers (§) ... refer to <document>"; without a declaration it is an error.

The project's planning notes are not in the repository, so citing them is an error in any
spelling. This file is not scanned: it spells those names out to refuse them.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAPER_REFERENCE = "docs/paper-reference.md"
SELF = PurePosixPath(Path(__file__).resolve().relative_to(ROOT).as_posix())
TEXT_SUFFIXES = {
    ".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml",
    ".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh", ".sh", ".cmake",
}  # fmt: skip
TEXT_NAMES = {"Makefile", "CMakeLists.txt"}

# Documents that live outside the repository (the project's planning notes and the paper's
# source), in every spelling they were cited with.
FOREIGN = re.compile(
    r"\bdesign(?:\.md)?\s*§|\bdesign\.md\b|ecosystem-notes|style-anchors|shared/docs/"
    r"|\.\./paper/|(?<![\w/.-])paper-reference(?![\w.-])"
)
DOC = re.compile(r"(?<![\w/.-])((?:\.{1,2}/)*(?:[\w-]+/)*[\w.-]*\w\.md)(?![\w-])")
PAPER = re.compile(r"\[?\bpaper\]?(?:'s)?[:\s]+(?=§)", re.IGNORECASE)
PAPER_EQUATION = re.compile(r"\bpaper\]?(?:'s)?\s+Eqs?\.\s?(\d+)", re.IGNORECASE)
NUMBER = r"\d+(?:\.\d+)*"
SECTION = re.compile(
    rf"§\s?(?P<a>{NUMBER})(?:\s?[–-]\s?(?P<b>{NUMBER}))?"
    r"(?:\s+items?\s+(?P<items>\d+(?:(?:,\s*|\s+and\s+)\d+)*))?"
)
CHAIN = re.compile(r"[\s,;]*(?:(?:and|or)\s+)?")
# Sentence ends: a full stop (not of an abbreviation) before a space, a blank line, a table
# cell border, a docstring quote.
BOUNDARY = re.compile(
    r"(?<!\be\.g)(?<!\bi\.e)(?<!\bEq)(?<!\bEqs)(?<!\bcf)(?<!\bvs)(?<!\bFig)[.!?](?=\s)"
    r"|\n[ \t#]*\n|\||\"\"\""
)
DECLARATION = re.compile(
    r"Section numbers \(§\)[^.]*?refer to\s+\[?`?((?:[\w-]+/)*[\w.-]+\.md)", re.DOTALL
)
QUOTED_HEADING = re.compile(r"`?\)?(?:\s*,\s*|\s+|\s*\(\s*)\"([^\"\n]{2,80})\"")
DEVIATION_IDS = re.compile(
    r"`?,?\s+\(?((?:[A-Z]{1,2}\d+)(?:\s*(?:,|–|-|and)\s*[A-Z]{1,2}\d+)*)\b(?![\w-])"
)
ANCHOR = re.compile(r"#([\w.-]+)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _normal(title: str) -> str:
    return re.sub(r"\s+", " ", title.replace("`", "").replace("*", "")).strip().lower()


@dataclass
class Doc:
    """What a document offers to cite: section numbers, titles, anchors, deviation ids."""

    sections: set[str] = field(default_factory=set)
    titles: list[str] = field(default_factory=list)
    anchors: set[str] = field(default_factory=set)
    deviation_ids: set[str] = field(default_factory=set)
    paper_sections: set[str] = field(default_factory=set)
    paper_equations: set[int] = field(default_factory=set)

    @classmethod
    def parse(cls, text: str) -> Doc:
        doc = cls()
        top = None  # number of the enclosing top-level numbered section
        table = None  # number of the section whose paper outline table is being read
        for line in text.splitlines():
            doc.anchors.update(re.findall(r'<a id="([^"]+)"></a>', line))
            heading = re.match(r"^(#+)\s+(.*)$", line)
            if heading:
                title = heading.group(2)
                plain = re.sub(r"<[^>]+>", "", title).strip()
                doc.titles.append(_normal(plain))
                doc.anchors.add(_slug(plain))
                numbered = re.match(rf"^({NUMBER})\.?\s", plain)
                if numbered:
                    doc.sections.add(numbered.group(1))
                    if len(heading.group(1)) == 2:
                        top = numbered.group(1)
                table = numbered.group(1) if numbered and plain.startswith("0.1 ") else None
                continue
            lead = re.match(r"^\s*(?:[-*]\s+)?\*\*([^*]+?)\.?\*\*", line)
            if lead:
                doc.titles.append(_normal(lead.group(1)))
            item = re.match(r"^(\d+)\.\s", line)
            if item and top is not None:
                doc.sections.add(f"{top}.{item.group(1)}")
            row = re.match(r"^\|\s*([A-Z]{1,2}\d+)\s*\|", line)
            if row:
                doc.deviation_ids.add(row.group(1))
            outline = re.match(rf"^\|\s*({NUMBER})\s*\|[^|]*\|([^|]*)\|", line)
            if table is not None and outline:
                doc.paper_sections.add(outline.group(1))
                doc.paper_equations.update(int(n) for n in re.findall(r"Eq\. (\d+)", line))
        return doc

    def has_title(self, title: str) -> bool:
        wanted = _normal(title)
        return any(t.startswith(wanted) for t in self.titles)


@cache
def tracked_files() -> tuple[PurePosixPath, ...]:
    """The repository's files (git's list; the tree without build outputs outside a clone)."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
        ).stdout.split("\0")
        names = [name for name in listing if name and (ROOT / name).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "runs", ".pytest_cache", ".hypothesis", ".benchmarks"}
        names = [
            path.relative_to(ROOT).as_posix()
            for path in ROOT.rglob("*")
            if path.is_file() and not skip & set(path.relative_to(ROOT).parts)
        ]
    return tuple(sorted(PurePosixPath(name) for name in names))


def text_files() -> list[PurePosixPath]:
    return [
        path
        for path in tracked_files()
        if (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES) and path != SELF
    ]


@cache
def load_doc(path: PurePosixPath) -> Doc:
    return Doc.parse((ROOT / path).read_text(encoding="utf-8"))


def resolve(token: str, citing: PurePosixPath) -> PurePosixPath | None:
    """The repository file a document token names: relative to the repository root, or to
    the citing file's folder (Markdown links); None when it is not in the repository."""
    for base in (PurePosixPath(), citing.parent):
        parts: list[str] = []
        for part in (base / token).parts:
            if part == "..":
                if not parts:
                    break
                parts.pop()
            elif part != ".":
                parts.append(part)
        else:
            candidate = PurePosixPath(*parts)
            if parts and (ROOT / candidate).is_file():
                return candidate
    return None


def _line(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _numbers(match: re.Match[str]) -> list[str]:
    """The section numbers one § reference names (both ends of a range, each item)."""
    first = match.group("a")
    numbers = [first]
    if match.group("b"):
        end = match.group("b")
        # "§5.1–5.2" names 5.2; "§5.1–2" is not used (ambiguous), so take the end as written.
        numbers.append(end)
    if match.group("items"):
        numbers += [f"{first}.{n}" for n in re.findall(r"\d+", match.group("items"))]
    return numbers


def check_text(path: PurePosixPath, text: str) -> list[str]:
    """Every citation error in one file's text, as ``path:line: message``."""
    errors: list[str] = []

    def error(position: int, message: str) -> None:
        errors.append(f"{path}:{_line(text, position)}: {message}")

    for match in FOREIGN.finditer(text):
        error(
            match.start(),
            f"cites {match.group(0).strip()!r}, which is not in the repository "
            f"(cite {PAPER_REFERENCE} §N, the paper, or the repo doc that holds the decision)",
        )

    boundaries = [0, *(m.end() for m in BOUNDARY.finditer(text)), len(text) + 1]

    def sentence_start(position: int) -> int:
        low, high = 0, len(boundaries) - 1
        while low < high:  # the last boundary <= position
            mid = (low + high + 1) // 2
            if boundaries[mid] <= position:
                low = mid
            else:
                high = mid - 1
        return boundaries[low]

    # (start, end, token) of every document token; a foreign one (already reported) is kept
    # as a source that resolves to nothing, so its § numbers are not reported twice.
    docs: list[tuple[int, int, str]] = [(m.start(), m.end(), "") for m in FOREIGN.finditer(text)]
    for match in DOC.finditer(text):
        token = match.group(1)
        docs.append((match.start(), match.end(), token))
        target = resolve(token, path)
        rest = text[match.end() :]
        cited = (
            "docs/" in token
            or token.startswith(("../", "./"))
            or re.match(r"`?\)?\s*§", rest) is not None
            or QUOTED_HEADING.match(rest) is not None
            or rest.startswith("#")
        )
        if target is None:
            if cited and not FOREIGN.search(token):
                error(match.start(), f"cites {token}, which is not in the repository")
            continue
        doc = load_doc(target)
        quoted = QUOTED_HEADING.match(rest)
        unquoted = text[match.start() - 1 : match.start()] != '"'
        if quoted and unquoted and not doc.has_title(quoted.group(1)):
            error(match.start(), f'{target} has no heading "{quoted.group(1)}"')
        anchor = ANCHOR.match(rest)
        if anchor and anchor.group(1) not in doc.anchors:
            error(match.start(), f"{target} has no anchor #{anchor.group(1)}")
        if target.name == "deviations.md":
            ids = DEVIATION_IDS.match(rest)
            if ids:
                for name in _deviation_ids(ids.group(1)):
                    if name not in doc.deviation_ids:
                        error(match.start(), f"{target} has no deviation {name}")

    declared = DECLARATION.search(text)
    default = resolve(declared.group(1), path) if declared else None
    if declared and default is None:
        error(declared.start(), f"declares § numbers of {declared.group(1)}, not in the repo")

    paper_doc = load_doc(PurePosixPath(PAPER_REFERENCE))
    paper_spans = [(m.start(), m.end()) for m in PAPER.finditer(text)]
    for match in PAPER_EQUATION.finditer(text):
        if int(match.group(1)) not in paper_doc.paper_equations:
            error(match.start(), f"the paper has no Eq. {match.group(1)} ({PAPER_REFERENCE} §0.1)")

    previous_paper_end = -1
    for match in SECTION.finditer(text):
        start = match.start()
        direct = any(end == start for _, end in paper_spans)
        chained = previous_paper_end >= 0 and CHAIN.fullmatch(text[previous_paper_end:start])
        numbers = _numbers(match)
        if direct or chained:
            previous_paper_end = match.end()
            for number in numbers:
                if number not in paper_doc.paper_sections:
                    error(start, f"the paper has no §{number} ({PAPER_REFERENCE} §0.1)")
            continue
        previous_paper_end = -1
        begin = sentence_start(start)
        sources = sorted((s, token) for s, _, token in docs if begin <= s < start)
        if sources:
            source = resolve(sources[-1][1], path) if sources[-1][1] else None
            if source is None:
                continue  # already reported as a missing document
        elif default is not None:
            source = default
        else:
            error(
                start,
                f"§{match.group('a')} has no source: write {PAPER_REFERENCE} "
                f"§{match.group('a')} or paper §N",
            )
            continue
        doc = load_doc(source)
        for number in numbers:
            if number not in doc.sections:
                error(start, f"{source} has no §{number}")
    return errors


def _deviation_ids(listing: str) -> list[str]:
    """``"S7, S8"`` -> S7, S8; ``"V1–V5"`` -> V1 to V5."""
    names: list[str] = []
    for part in re.split(r"\s*(?:,|and)\s*", listing):
        span = re.fullmatch(r"([A-Z]{1,2})(\d+)\s*[–-]\s*([A-Z]{1,2})(\d+)", part)
        if span and span.group(1) == span.group(3):
            first, last = int(span.group(2)), int(span.group(4))
            names += [f"{span.group(1)}{n}" for n in range(first, last + 1)]
        elif part:
            names.append(part)
    return names


def test_every_citation_in_the_repository_resolves() -> None:
    errors = [
        message
        for path in text_files()
        for message in check_text(path, (ROOT / path).read_text(encoding="utf-8"))
    ]
    assert not errors, "broken citations:\n" + "\n".join(errors)


def test_paper_reference_anchors_match_their_numbers() -> None:
    text = (ROOT / PAPER_REFERENCE).read_text(encoding="utf-8")
    seen: set[str] = set()
    for line in text.splitlines():
        heading = re.match(rf'^#+ (?:<a id="s([^"]+)"></a>)?({NUMBER})\.? ', line)
        if heading:
            number = heading.group(2)
            assert heading.group(1) == number, f"heading {number} lacks the anchor s{number}"
            assert number not in seen, f"section {number} is numbered twice"
            seen.add(number)
    items = re.findall(r'^(\d+)\. <a id="s8\.(\d+)"></a>', text, re.MULTILINE)
    assert items, "the §8 checklist has no anchored items"
    assert all(a == b for a, b in items), f"§8 items with another item's anchor: {items}"
    outline = load_doc(PurePosixPath(PAPER_REFERENCE))
    assert {"3.3.1", "3.4", "4.1"} <= outline.paper_sections
    assert set(range(1, 12)) == outline.paper_equations


CITING = PurePosixPath("pyskick/example.py")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("See design §12 for the statistics.", "not in the repository"),
        ("See `design.md` for the plan.", "not in the repository"),
        ("(ecosystem-notes §3)", "not in the repository"),
        ("(paper-reference §5.2)", "not in the repository"),
        ("(see ../shared/docs/paper-reference.md)", "not in the repository"),
        ("(docs/no-such-doc.md)", "docs/no-such-doc.md, which is not in the repository"),
        ("(docs/paper-reference.md §5.99)", "docs/paper-reference.md has no §5.99"),
        ("(docs/paper-reference.md §5.1–5.9)", "docs/paper-reference.md has no §5.9"),
        ("(docs/paper-reference.md §8.99)", "docs/paper-reference.md has no §8.99"),
        ("(docs/paper-reference.md §4.6, §5.4, §12)", "docs/paper-reference.md has no §12"),
        ("(paper §3.9)", "the paper has no §3.9"),
        ("(paper §3.3.1, §3.7)", "the paper has no §3.7"),
        ("(paper Eq. 12)", "the paper has no Eq. 12"),
        ("the greedy rule (§5.5)", "§5.5 has no source"),
        ("(docs/training.md §4)", "docs/training.md has no §4"),
        ('(docs/reproduce.md, "No such part")', 'docs/reproduce.md has no heading "No such part"'),
        ("(docs/deviations.md K6, Q9)", "docs/deviations.md has no deviation Q9"),
        ("(docs/paper-reference.md#s77)", "docs/paper-reference.md has no anchor #s77"),
    ],
)
def test_a_broken_citation_is_reported(text: str, expected: str) -> None:
    errors = check_text(CITING, text)
    assert any(expected in message for message in errors), errors
    assert all(message.startswith(f"{CITING}:1: ") for message in errors)


@pytest.mark.parametrize(
    "text",
    [
        "(docs/paper-reference.md §5.2)",
        "(`docs/paper-reference.md` §4.6, §5.4–5.5 and §8.14)",
        "``docs/paper-reference.md`` (§2.4 moves, §5.2 NMS)",
        "(docs/paper-reference.md\n# §1.3: two lights)",
        "(ours(rew), paper §3.3.1, docs/paper-reference.md §5.1–5.2 and §4.7)",
        "paper §3.3–3.4, Eq. 7; paper Eq. 10",
        "paper §3.3.1 and §3.4",
        '(docs/reproduce.md, "The demo") and `docs/reproduce.md` ("The study")',
        '(`docs/training.md`,\n"CPU memory")',
        "docs/deviations.md K6; docs/deviations.md S7, S8 and E1",
        "[the facts](../docs/paper-reference.md#s8.14)",
        "Section numbers (§) below refer to docs/paper-reference.md.\n\n| K1 | tie (§5.5, §8.14) |",
        'write ``table.md`` and ``"table.md"``; runs/demo/table.md',
    ],
)
def test_a_valid_citation_passes(text: str) -> None:
    assert check_text(CITING, text) == []


def test_a_doc_link_resolves_relative_to_the_citing_file() -> None:
    assert check_text(PurePosixPath("docs/model.md"), "(paper-reference.md §3.9)") == []
    errors = check_text(PurePosixPath("pyskick/x.py"), "[x](paper-reference.md#s3.9)")
    assert errors
    assert "not in the repository" in errors[0]
