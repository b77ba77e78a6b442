"""``pyskick plugins``: installed plugins, their hooks and the names they registered
(sidekicks, critics, actors, datasets, loggers and methods, the rows of Table 1)."""

from __future__ import annotations

import json
from typing import Any

import click

from pyskick_cli.shared_options import json_option


def plugin_report(include_builtins: bool) -> dict[str, Any]:
    """Plugins (with distribution, version, hooks, registered names) and load failures."""
    from pyskick.plugins import get_host
    from pyskick.registry import KINDS

    host = get_host()
    registries = host.diagnose()
    registered: dict[str, dict[str, list[str]]] = {}
    summaries: dict[str, str] = {}
    options: dict[str, list[dict[str, Any]]] = {}
    for kind in KINDS:
        for entry in registries[kind]:
            registered.setdefault(entry.plugin, {}).setdefault(kind, []).append(entry.name)
            summaries[f"{kind}:{entry.name}"] = entry.summary
            declared = getattr(entry, "options", ())  # methods declare none
            if declared:
                options[f"{kind}:{entry.name}"] = [_option_record(o) for o in declared]
    plugins = []
    for name, info in sorted(host.plugins.items()):
        if info.builtin and not include_builtins:
            continue
        plugin = host.pm.get_plugin(name)
        hooks = sorted(caller.name for caller in host.pm.get_hookcallers(plugin) or [])
        plugins.append(
            {
                "name": name,
                "distribution": info.distribution,
                "version": info.version,
                "builtin": info.builtin,
                "hooks": hooks,
                "registered": registered.get(name, {}),
            }
        )
    return {
        "plugins": plugins,
        "summaries": summaries,
        "options": options,
        "failures": dict(sorted(host.failures.items())),
    }


def _option_record(option: Any) -> dict[str, Any]:
    """A declared option as JSON: name, type, default (None when it depends on the run), help
    and the one-line description."""
    return {
        "name": option.name,
        "type": option.type.__name__,
        "default": None if callable(option.default) else option.default,
        "help": option.help,
        "description": option.describe(),
    }


@click.command()
@click.option("--all", "include_builtins", is_flag=True, help="Include pyskick's built-ins.")
@json_option(help="Print one JSON object.")
def plugins(include_builtins: bool, as_json: bool) -> None:
    """List installed plugins, their hooks and the names they registered."""
    # Loading the plugin commands records their failures too.
    root = click.get_current_context().find_root()
    root.command.list_commands(root)  # type: ignore[attr-defined]
    report = plugin_report(include_builtins)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    if not report["plugins"]:
        click.echo(
            "no plugins installed" + ("" if include_builtins else " (--all shows built-ins)")
        )
    for plugin in report["plugins"]:
        origin = f"{plugin['distribution']} {plugin['version']}" if plugin["distribution"] else "?"
        click.echo(f"{plugin['name']} ({origin}{', built-in' if plugin['builtin'] else ''})")
        click.echo(f"  hooks: {', '.join(plugin['hooks']) or '-'}")
        for kind, names in sorted(plugin["registered"].items()):
            for name in names:
                summary = report["summaries"][f"{kind}:{name}"]
                click.echo(f"  {kind} {name}" + (f": {summary}" if summary else ""))
                for option in report["options"].get(f"{kind}:{name}", []):
                    click.echo(f"    option {option['description']}")
    for name, error in report["failures"].items():
        click.echo(f"{name}: FAILED to load: {error}", err=True)
