"""Generate the command-line reference, ``docs/cli.md``, from the Click commands.

``python -m pyskick_cli.docgen [--out docs/cli.md] [--check]`` (``make docs``) walks the
``pyskick`` group and its subgroups and writes every built-in command's usage, help and options
as Markdown. The output depends only on the commands' declarations: commands in their
declared order, no terminal width, no environment. Commands that plugins add (hook
``pyskick_register_commands``) are left out; ``pyskick --help`` lists them.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from pathlib import Path

import click

DEFAULT_OUT = Path("docs/cli.md")
WIDTH = 100
REGENERATE = "make docs (or: python -m pyskick_cli.docgen --out docs/cli.md)"
BUILTIN_MODULES = ("pyskick_cli", "pyskick")


def _is_builtin(command: click.Command) -> bool:
    """Whether pyskick itself defines ``command`` (not a plugin)."""
    module = getattr(command.callback, "__module__", None) or ""
    return module.split(".")[0] in BUILTIN_MODULES


def builtin_subcommands(group: click.Group, ctx: click.Context) -> list[click.Command]:
    """The built-in subcommands of ``group`` in their declared order.

    A lazy group's declared names are used as they are: listing it would load the plugins'
    commands.
    """
    lazy = getattr(group, "lazy_subcommands", None)
    names = list(lazy) if lazy else list(group.commands)
    commands = [group.get_command(ctx, name) for name in names]
    return [command for command in commands if command is not None and _is_builtin(command)]


def _fill(text: str, hanging: str = "") -> str:
    """``text`` rewrapped to :data:`WIDTH`, continuation lines indented by ``hanging``."""
    return textwrap.fill(
        " ".join(text.split()),
        width=WIDTH,
        subsequent_indent=hanging,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _prose(text: str) -> str:
    """Help text made safe for Markdown prose: ``<split>`` would be read as an HTML tag."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _help_blocks(help_text: str | None) -> list[str]:
    """Click help text as Markdown paragraphs: ``\\b`` paragraphs keep their lines (a text
    block), the others are rewrapped; everything after ``\\f`` is Click's private part."""
    text = inspect.cleandoc(help_text or "").split("\f")[0].strip()
    blocks = []
    for paragraph in text.split("\n\n"):
        lines = paragraph.splitlines()
        if lines and lines[0].strip() == "\b":
            blocks.append("```text\n" + "\n".join(lines[1:]) + "\n```")
        elif paragraph.strip():
            blocks.append(_fill(_prose(paragraph)))
    return blocks


def _anchor(path: str) -> str:
    """GitHub's anchor of a heading ``` `path` ```."""
    return path.replace(" ", "-")


def _option_lines(command: click.Command, ctx: click.Context) -> list[str]:
    """One Markdown list item per visible option, as ``--help`` shows it (its declaration,
    help, default and range); ``--help`` itself is said once, in the header."""
    lines = []
    help_option = command.get_help_option(ctx)
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.hidden or param is help_option:
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        declaration, help_text = record
        entry = f"- `{declaration}`" + (f": {_prose(help_text)}" if help_text else "")
        lines.append(_fill(entry, hanging="  "))
    return lines


def _section(command: click.Command, ctx: click.Context, level: int) -> list[str]:
    """The Markdown lines of ``command`` (heading ``level``) and, for a group, of its
    built-in subcommands."""
    path = ctx.command_path
    out = [f"{'#' * level} `{path}`", ""]
    for block in _help_blocks(command.help):
        out += [block, ""]
    usage = " ".join([path, *command.collect_usage_pieces(ctx)])
    out += ["```text", f"Usage: {usage}", "```", ""]
    options = _option_lines(command, ctx)
    if options:
        out += ["Options:", "", *options, ""]
    if isinstance(command, click.Group):
        subcommands = builtin_subcommands(command, ctx)
        out += ["Commands:", ""]
        for sub in subcommands:
            sub_path = f"{path} {sub.name}"
            summary = sub.get_short_help_str(limit=WIDTH)
            entry = f"- [`{sub_path}`](#{_anchor(sub_path)}): {_prose(summary)}"
            out.append(_fill(entry, hanging="  "))
        out.append("")
        for sub in subcommands:
            sub_ctx = click.Context(sub, info_name=sub.name, parent=ctx, **sub.context_settings)
            # The commands of ``pyskick`` itself are sections of their own, a subgroup's
            # commands are sections inside the subgroup's.
            out += _section(sub, sub_ctx, level if ctx.parent is None else level + 1)
    return out


def render(group: click.Group | None = None) -> str:
    """The Markdown reference of ``group`` (default: the ``pyskick`` command)."""
    if group is None:
        from pyskick_cli.main import cli

        group = cli
    ctx = click.Context(group, info_name="pyskick", **group.context_settings)
    header = [
        "# Command-line reference",
        "",
        _fill(
            "Generated from the Click commands by `python -m pyskick_cli.docgen` (`make docs`); "
            "do not edit it by hand: `tests/docs/test_cli_reference.py` fails when it is out of "
            "date. Every command also takes `-h`/`--help`. Commands added by plugins (hook "
            "`pyskick_register_commands`) are not listed here: `pyskick --help` shows them, "
            "and `pyskick plugins --all` names the plugin of each."
        ),
        "",
    ]
    body = _section(group, ctx, level=2)
    return "\n".join(header + body).rstrip("\n") + "\n"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_OUT,
    show_default=True,
    help="Markdown file to write.",
)
@click.option(
    "--check", is_flag=True, help="Compare with --out instead of writing it (exit 1 if stale)."
)
def main(out: Path, check: bool) -> None:
    """Write the command-line reference of pyskick's built-in commands as Markdown."""
    text = render()
    if check:
        current = out.read_text(encoding="utf-8") if out.is_file() else None
        if current != text:
            click.echo(f"{out} is out of date with the CLI; regenerate it: {REGENERATE}", err=True)
            sys.exit(1)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    click.echo(f"wrote {out}", err=True)


if __name__ == "__main__":
    main()
