"""The CLI shell: one small class per command, gathered into one argparse parser.

The CLI adds parsing, progress bars, tables and files, never logic of its own: every command calls
the Python API. A user error is one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
from typing import ClassVar

from ..errors import TokendistError
from ..kernels._choice import allow_auto_threads

__all__ = ["Command", "COMMANDS", "command", "build_parser", "main", "console", "UsageError"]


class UsageError(TokendistError):
    """Bad command-line usage."""


class Command:
    """A CLI command. ``name`` may have two words (``"graph info"``) for a command group."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    description: ClassVar[str] = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace) -> int | None:
        raise NotImplementedError


COMMANDS: list[type[Command]] = []


def command(cls: type[Command]) -> type[Command]:
    """Class decorator registering a command."""
    if any(c.name == cls.name for c in COMMANDS):
        raise ValueError(f"duplicate command {cls.name!r}")
    COMMANDS.append(cls)
    return cls


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    from . import _modules  # noqa: F401  (imports every command module)

    parser = _Parser(prog="tokendist", description="Token distribution (discrete load balancing) on networks.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"tokendist {__version__}")
    top = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    groups: dict[str, argparse._SubParsersAction] = {}
    for cls in sorted(COMMANDS, key=lambda c: c.name):
        words = cls.name.split()
        if len(words) == 1:
            sub = top.add_parser(words[0], help=cls.help, description=cls.description or cls.help)
        else:
            if words[0] not in groups:
                gp = top.add_parser(words[0], help=f"{words[0]} commands")
                groups[words[0]] = gp.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser)
                gp.set_defaults(_group=gp)
            sub = groups[words[0]].add_parser(words[1], help=cls.help, description=cls.description or cls.help)
        instance = cls()
        instance.add_arguments(sub)
        sub.set_defaults(_command=instance)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``tokendist`` command."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        cmd = getattr(args, "_command", None)
        if cmd is None:
            # The help on stdout, and the one error line every usage mistake gives on stderr.
            shown = getattr(args, "_group", None) or parser
            shown.print_help()
            what = "a subcommand" if shown is not parser else "a command"
            raise UsageError(f"{shown.prog}: expected {what} (listed above)")
        # threads=auto may race threaded kernels: this process forks (tokendist bench) only
        # before any kernel runs (protocols/_measured_choice.py, "Who may race threads").
        previous = allow_auto_threads()
        try:
            return int(cmd.run(args) or 0)
        finally:
            allow_auto_threads(previous)
    except TokendistError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # A second Ctrl-C while this line is printed and the process exits would end it by the
        # signal (a traceback, or no message): ignored from here on.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # A path the user gave (--out, --save-loads, --output) that cannot be created or written.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}cannot write ({exc.strerror or exc})", file=sys.stderr)
        return 2


def console() -> None:
    """The ``tokendist`` program: :func:`main` on the command line, then the exit.

    At exit the interpreter frees every object and, between the modules it clears, runs full
    garbage collections over all of them: with numba, scipy and matplotlib loaded, some 200,000
    objects, 0.1-0.4 s of a command's wall time on a 2-core machine. Frozen first
    (:func:`gc.freeze`), they are freed by their reference counts alone, as the teardown does
    anyway; only reference cycles are left to the operating system, which the interpreter does not
    promise to finalize either. Every file a command writes is closed before it returns, and the
    ``atexit`` handlers (MPI's finalize, logging's flush) run as before.
    """
    # The imports' objects live as long as the process: later full collections skip them too (and
    # so do those of the worker processes forked from this one).
    gc.freeze()
    code = main()
    gc.freeze()
    sys.exit(code)
