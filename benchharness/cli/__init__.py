"""``benchharness``: list, run, leaderboard, compare, analyze, export, data, train, tune.

One module per command (``COMMANDS``), each with ``HELP``, ``add_arguments(parser)`` and
``main(args) -> int``. Start-up stays cheap: the commands that compute nothing (``list``,
``leaderboard``, ``data``, ``--help``) import no torch, transformers, scikit-learn or scipy, and
the sub-commands of ``train`` and ``tune`` (whose plugins import torch) are built only when the
command line names that command.

Messages: the library logs under ``benchharness``; each command sends those records to standard
error (``-v`` adds debug messages, ``-q`` keeps warnings and errors only and hides progress bars)
and prints its own output to standard output (``benchharness.cli.messages``).

Errors: a :class:`~benchharness.core.errors.UserError` (bad input, missing data, an unknown name)
prints as one line and exits 2, and so does an ``OSError`` that names a path (permissions, a full
disk); any other exception keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

from benchharness.cli import (
    analyze,
    compare,
    data,
    export,
    leaderboard,
    listing,
    protocols,
    push,
    report,
    run,
    sentences,
    train,
    tune,
)
from benchharness.cli.messages import messages
from benchharness.cli.process import configure
from benchharness.core.errors import UserError
from benchharness.core.settings import load_config
from benchharness.core.version import __version__

#: command name -> its module
COMMANDS: dict[str, ModuleType] = {
    "list": listing,
    "run": run,
    "leaderboard": leaderboard,
    "export": export,
    "compare": compare,
    "analyze": analyze,
    "data": data,
    "train": train,
    "tune": tune,
    "push": push,
    "report": report,
    "protocols": protocols,
    "sentences": sentences,
}
#: commands whose sub-commands come from plugins that import torch: built only when named
PLUGIN_COMMANDS = ("train", "tune")
#: the exit status of a command stopped by Ctrl-C, as the shell reports one (128 + SIGINT)
INTERRUPTED = 130


def build_parser(expand: str | None = None) -> argparse.ArgumentParser:
    """The full parser; ``expand`` names the plugin command (``train``, ``tune``) whose
    sub-commands to build, which imports its plugins."""
    parser = argparse.ArgumentParser(prog="benchharness", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"benchharness {__version__}")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="configuration file (default: $BENCHHARNESS_CONFIG, else benchharness.toml here or in a parent "
        "folder, else ~/.config/benchharness/config.toml, whose [tasks.*] are added beneath any of them)",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0, help="debug messages too")
    common.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only, no progress bars")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        p = sub.add_parser(name, help=module.HELP, parents=[common])
        if name in PLUGIN_COMMANDS:
            if name == expand:
                module.add_arguments(p)
        else:
            module.add_arguments(p)
    return parser


def config_path(argv: list[str]) -> Path | None:
    """The file ``--config FILE`` (before the command) names, else None; read before anything else,
    since the process's settings depend on it."""
    for i, arg in enumerate(argv):
        value = (
            arg.split("=", 1)[1]
            if arg.startswith("--config=")
            else (argv[i + 1] if arg == "--config" and i + 1 < len(argv) else None)
        )
        if value is not None:
            path = Path(value).expanduser()
            if not path.is_file():
                raise UserError(f"configuration file {path} (--config) does not exist")
            return path.resolve()
        if not arg.startswith("-"):
            return None  # the command: its own flags follow
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        config = load_config(config_path(argv))  # read once, here: every command takes it from args.configuration
        configure(argv, config)  # the process's settings, the one place they are made; a broken config is a user error
        command = next(
            (a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] != "--config")), None
        )
        args = build_parser(expand=command if command in PLUGIN_COMMANDS else None).parse_args(argv)
        args.configuration = config
        with messages(args.verbose, args.quiet):
            return COMMANDS[args.command].main(args)
    except UserError as exc:
        print(f"benchharness: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        # any command: results and runs are written whole, one at a time, so what was stored stays;
        # an interrupted training says itself what its folder keeps (training.resume.Interrupted)
        said = str(exc) or (
            "interrupted; what was stored before is kept (each result, each finished run, the last "
            "checkpoint); rerun the same command to compute the rest"
        )
        print(f"benchharness: {said}", file=sys.stderr)
        return INTERRUPTED
    except OSError as exc:
        if exc.filename is None:  # not about a path the user controls: keep the traceback
            raise
        print(f"benchharness: error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
