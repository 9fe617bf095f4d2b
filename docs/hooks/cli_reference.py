"""MkDocs hook: the command-line reference (``docs/reference/cli.md``) written from the argument
parsers themselves at build time, so that it cannot drift from the code.

The page holds a marker (``MARKER``) that this hook replaces with one section per command of
``benchharness.cli.COMMANDS``, and one per sub-command of those that have them (``train``'s methods,
``tune``'s tuners, ``data``'s actions): its one-line help, the first paragraph of its module's
docstring, its usage line as argparse prints it, and a table of its arguments (flags, value, default,
choices, help). Options every command takes (``-v``, ``-q``) are listed once. ``train`` and ``tune``
build their sub-commands from plugins, which ``benchharness.cli.build_parser`` imports only when
asked (``expand=``): the hook asks for each.

Anchors are stable: ``#run`` for ``benchharness run``, ``#train-simcse`` for ``benchharness train
simcse``.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any

from docs_text import code_block, escape, fill_marker, first_paragraph, rst_literals_to_markdown

#: the text in docs/reference/cli.md that the generated reference replaces
MARKER = "<!-- cli-reference -->"
PAGE = "reference/cli.md"
#: the width usage lines are wrapped at
USAGE_WIDTH = 100


def command_parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each command's parser, with ``train``'s and ``tune``'s
    sub-commands built (each from a parser built for it, as the command line does)."""
    from benchharness.cli import PLUGIN_COMMANDS, build_parser

    top = build_parser()
    commands = dict(_subcommands(top))
    for name in PLUGIN_COMMANDS:
        commands[name] = dict(_subcommands(build_parser(expand=name)))[name]
    return top, commands


def _subparsers_action(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """``(name, parser)`` of each sub-command, aliases left out, in the order they were added."""
    action = _subparsers_action(parser)
    if action is None:
        return []
    seen: set[int] = set()
    out = []
    for name, sub in action.choices.items():
        if id(sub) not in seen:
            seen.add(id(sub))
            out.append((name, sub))
    return out


def _subcommand_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    action = _subparsers_action(parser)
    if action is None:
        return {}
    return {a.dest: a.help or "" for a in action._choices_actions}


def _documented(action: argparse.Action) -> bool:
    return action.help is not argparse.SUPPRESS and not isinstance(
        action, argparse._SubParsersAction | argparse._HelpAction
    )


def _metavar(action: argparse.Action) -> str:
    """The value an option takes, written as argparse's usage writes it."""
    if action.nargs == 0:
        return ""
    if action.metavar is not None:
        name = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.choices is not None:
        name = "{" + ",".join(str(c) for c in action.choices) + "}"
    else:
        name = action.dest.upper() if action.option_strings else action.dest
    nargs = action.nargs
    if nargs is None:
        return name
    if nargs == argparse.OPTIONAL:
        return f"[{name}]"
    if nargs == argparse.ZERO_OR_MORE:
        return f"[{name} ...]"
    if nargs == argparse.ONE_OR_MORE:
        return f"{name} [{name} ...]"
    if isinstance(nargs, int):
        return " ".join([name] * nargs)
    return name


def _help(action: argparse.Action, prog: str) -> str:
    """The help text with argparse's ``%(default)s``-style fields filled in, as ``--help`` shows it."""
    text = action.help or ""
    if "%" in text:
        fields: dict[str, Any] = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
        fields["prog"] = prog
        if fields.get("choices") is not None:
            fields["choices"] = ", ".join(str(c) for c in fields["choices"])
        text = text % fields
    return " ".join(text.split())


def _default(action: argparse.Action) -> str:
    default = action.default
    if default is None or default is argparse.SUPPRESS or action.nargs == 0 or default == []:
        return ""
    return f"`{default}`"


def _choices(action: argparse.Action) -> str:
    """The choices, where the value column does not show them already (options without a metavar)."""
    if action.choices is None or (action.option_strings and action.metavar is None):
        return ""
    return ", ".join(f"`{c}`" for c in action.choices)


def _cell(text: str) -> str:
    return escape(text) if text else ""


def arguments_table(actions: list[argparse.Action], prog: str) -> str:
    """A Markdown table of the documented ones of ``actions`` (a parser's arguments), positionals
    first."""
    rows = ["| Argument | Value | Default | Description |", "| --- | --- | --- | --- |"]
    actions = [a for a in actions if _documented(a)]
    actions.sort(key=lambda a: bool(a.option_strings))  # stable: positionals first, each group in order
    for action in actions:
        names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
        value = _metavar(action) if action.option_strings or action.nargs is not None else ""
        description = _cell(_help(action, prog))
        choices = _choices(action)
        if choices:
            description = f"{description} One of {choices}." if description else f"One of {choices}."
        rows.append(f"| {names} | {f'`{value}`' if value else ''} | {_default(action)} | {description} |")
    return "\n".join(rows) if len(rows) > 2 else ""


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage line as ``--help`` prints it, wrapped at a fixed width (not the terminal's, so that
    every build writes the same page)."""
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _module_paragraph(module: Any) -> str:
    return rst_literals_to_markdown(first_paragraph(inspect.getdoc(module)))


def _section(
    level: int,
    anchor: str,
    parser: argparse.ArgumentParser,
    help_text: str,
    about: str,
    leave_out: frozenset[str],
) -> list[str]:
    out = [f"{'#' * level} `{parser.prog}` {{ #{anchor} }}", ""]
    if help_text:
        out += [escape(help_text[0].upper() + help_text[1:]) + ".", ""]
    if about:
        out += [about, ""]
    out += [code_block(_usage(parser)), ""]
    table = arguments_table([a for a in parser._actions if not set(a.option_strings) & leave_out], parser.prog)
    if table:
        out += [table, ""]
    helps = _subcommand_help(parser)
    for name, sub in _subcommands(parser):
        out += _section(level + 1, f"{anchor}-{name}", sub, helps.get(name, ""), "", frozenset())
    return out


def render() -> str:
    """The whole generated reference, in Markdown."""
    from benchharness.cli import COMMANDS

    top, commands = command_parsers()
    shared = frozenset.intersection(
        *(frozenset(s for a in p._actions if _documented(a) for s in a.option_strings) for p in commands.values())
    )
    out = [code_block(_usage(top)), "", arguments_table(top._actions, top.prog), ""]
    if shared:
        first = next(iter(commands.values()))
        common = [a for a in first._actions if set(a.option_strings) & shared]
        out += ["Every command also takes these options, after its name:", "", arguments_table(common, top.prog), ""]
    helps = _subcommand_help(top)
    for name, parser in commands.items():
        out += _section(2, name, parser, helps.get(name, ""), _module_paragraph(COMMANDS[name]), shared)
    return "\n".join(out).rstrip() + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: fill in the reference on its page; every other page passes through."""
    return fill_marker(markdown, page, PAGE, MARKER, "CLI reference", render)
