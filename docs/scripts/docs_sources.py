"""What the generated reference pages are made of, in one place (used by the mkdocs-gen-files scripts and by
``tests/test_docs.py``): the public modules of dplens, the real home of every name in ``dplens.__all__``, and the
command-line parser walked into Markdown. Nothing here is hand-listed: a new export, module or option appears by
itself."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.util
import inspect
import os
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dplens

#: Modules whose members are not part of the documented surface (the console entry and the lazy export table).
_SKIP = {"dplens.__main__"}


def public_modules() -> list[str]:
    """Every importable dplens module with no private component in its dotted name, in order."""
    names = ["dplens"]
    for info in pkgutil.walk_packages(dplens.__path__, "dplens.", onerror=lambda name: None):
        if any(part.startswith("_") for part in info.name.split(".")) or info.name in _SKIP:
            continue
        names.append(info.name)
    return sorted(names)


def export_homes() -> dict[str, str]:
    """name → the dotted path of the object behind ``dplens.<name>`` (where its docstring lives)."""
    homes: dict[str, str] = {}
    for name in dplens.__all__:
        obj = getattr(dplens, name)
        module = getattr(obj, "__module__", None)
        if module is None or not hasattr(obj, "__qualname__"):
            homes[name] = f"dplens.{name}"  # a plain value such as __version__
        else:
            homes[name] = f"{module}.{obj.__qualname__}"
    return homes


def _import(module_name: str) -> Any | None:
    """The module, or None when importing it needs an optional dependency that is not installed (e.g. torch for
    ``dplens.integrations``): such a module is then read statically, from its source."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and not err.name.startswith("dplens"):
            return None
        raise


def _source_tree(module_name: str) -> ast.Module:
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise ValueError(f"cannot find the source of {module_name!r}")
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


def _static_members(tree: ast.Module) -> dict[str, str]:
    """name → own docstring of the module's ``__all__`` (a literal), else its public top-level defs and classes."""
    defs = {
        n.name: ast.get_docstring(n) or ""
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = ast.literal_eval(node.value)
            return {name: defs.get(name, "(re-exported)") for name in names}
    return {name: doc for name, doc in defs.items() if not name.startswith("_")}


def module_members(module_name: str) -> list[str]:
    """The names a module documents: its ``__all__``, else its public callables and classes defined in it."""
    module = _import(module_name)
    if module is None:
        return list(_static_members(_source_tree(module_name)))
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and getattr(v, "__module__", None) == module_name and callable(v)
    ]


def own_docstring(obj: object) -> str:
    """``obj``'s own docstring ('' when it has none: a dataclass's generated signature does not count)."""
    doc = obj.__doc__ if isinstance(getattr(obj, "__doc__", None), str) else ""
    if inspect.isclass(obj) and doc.startswith(f"{obj.__name__}("):
        return ""
    return doc.strip()


def undocumented() -> list[str]:
    """Public modules and callable public members (classes, functions) without a docstring of their own."""
    missing = []
    for module_name in public_modules():
        module = _import(module_name)
        if module is None:  # an optional dependency is missing: check the source
            tree = _source_tree(module_name)
            if not ast.get_docstring(tree):
                missing.append(module_name)
            missing += [f"{module_name}.{n}" for n, doc in _static_members(tree).items() if not doc.strip()]
            continue
        if not (module.__doc__ or "").strip():
            missing.append(module_name)
        for name in module_members(module_name):
            obj = getattr(module, name)
            if callable(obj) and not own_docstring(obj):
                missing.append(f"{module_name}.{name}")
    return missing


@contextlib.contextmanager
def _columns(width: int = 100) -> Iterator[None]:
    """argparse wraps usage lines at $COLUMNS: the same width on every machine, restored afterwards."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    metavar: str
    help: str
    default: str
    choices: tuple[str, ...]
    required: bool
    takes_value: bool


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    usage: str
    description: str
    positionals: tuple[Option, ...]
    options: tuple[Option, ...]


def _option(action: argparse.Action) -> Option:
    default = action.default
    shown = "" if default in (None, argparse.SUPPRESS, False) or isinstance(action, argparse._HelpAction) else default
    return Option(
        flags=tuple(action.option_strings) or (action.dest,),
        metavar=str(action.metavar or (action.dest.upper() if action.option_strings else action.dest)),
        help=(action.help or "").replace("%(default)s", str(default)).replace("%%", "%"),
        default="" if shown == "" else str(shown),
        choices=tuple(str(c) for c in action.choices) if action.choices else (),
        required=bool(action.required),
        takes_value=action.nargs != 0,
    )


def cli_commands() -> list[Command]:
    """The subcommands of ``dplens`` as ``build_parser()`` defines them (the single source of truth)."""
    from dplens.cli import build_parser

    with _columns():
        return _commands(build_parser())


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[Command]:
    """The subcommands of ``parser``; a command group (``budget``, ``registry``) is listed as each of its
    subcommands, named by both words."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    commands = []
    for name, subparser in sub.choices.items():
        if any(isinstance(a, argparse._SubParsersAction) for a in subparser._actions):
            commands += _commands(subparser, prefix=f"{prefix}{name} ")  # a command group: `dplens budget create`
            continue
        actions = [a for a in subparser._actions if not isinstance(a, argparse._HelpAction)]
        commands.append(
            Command(
                name=prefix + name,
                help=helps.get(name, ""),
                usage=subparser.format_usage().strip().removeprefix("usage: "),
                description=subparser.description or "",
                positionals=tuple(_option(a) for a in actions if not a.option_strings),
                options=tuple(_option(a) for a in actions if a.option_strings),
            )
        )
    return commands


def cli_option_names() -> dict[str, set[str]]:
    """subcommand → every option string it accepts (for the stale-option check of the guides)."""
    names: dict[str, set[str]] = {}
    for c in cli_commands():
        flags = {f for o in c.options for f in o.flags} | {"-h", "--help"}
        names[c.name] = flags
        if " " in c.name:  # a group's options under the group's name too (`dplens budget charge ... --release`)
            names.setdefault(c.name.split(" ")[0], set()).update(flags)
    return names


def _slug(name: str) -> str:
    return name.replace(" ", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def cli_markdown() -> str:
    """The CLI reference page."""
    from dplens.cli import build_parser

    with _columns():
        top_usage = build_parser().format_usage()
    lines = [
        "# Command-line reference",
        "",
        "Generated from the argparse parser of `dplens.cli` (`build_parser()`) when the site is built: every",
        "subcommand and option below is the one the installed `dplens` accepts. Invalid input prints one line on",
        "stderr and exits with status 2; `--json` prints one JSON object on stdout.",
        "",
        "```text",
        top_usage.strip().removeprefix("usage: "),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    commands = cli_commands()
    lines += [f"| [`dplens {c.name}`](#dplens-{_slug(c.name)}) | {_cell(c.help)} |" for c in commands]
    for c in commands:
        lines += ["", f"## `dplens {c.name}` {{#dplens-{_slug(c.name)}}}", "", _cell(c.help).capitalize() + ".", ""]
        if c.description:
            lines += [c.description, ""]
        lines += ["```text", c.usage, "```", ""]
        rows = [*c.positionals, *c.options]
        if rows:
            lines += ["| argument | meaning | choices | default |", "|---|---|---|---|"]
            for o in rows:
                value = f" {o.metavar}" if o.takes_value and o.flags[0].startswith("-") else ""
                flags = ", ".join(f"`{f}{value}`" for f in o.flags)
                choices = ", ".join(f"`{x}`" for x in o.choices)
                required = " (required)" if o.required and o.flags[0].startswith("-") else ""
                lines.append(f"| {flags}{required} | {_cell(o.help)} | {choices} | {_cell(o.default)} |")
    return "\n".join(lines) + "\n"
