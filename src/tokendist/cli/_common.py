"""Arguments shared by the commands that run protocols (run, compare, bounds)."""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

from .._files import check_writable_file
from ..engine import DYNAMICS, EdgeFailures
from ..errors import TokendistError
from ..experiments.defaults import DEFAULT_MAX_STEPS, DEFAULT_SEED
from ._output import parse_key_values

__all__ = ["add_run_arguments", "dynamics_from_args", "nonneg_int", "slack_int", "positive_int", "probability", "number",
           "path_arg", "name_list", "check_outputs"]


def check_outputs(folder=None, file=None) -> None:
    """Make sure the output ``folder`` and ``file`` can be written before a long run, not after it.

    The folder must be a folder or not exist yet, with its nearest existing parent writable (it is
    created only when the outputs are written: an early error leaves no empty folder); for the
    file, its folder must exist and the path must not be a folder. Nothing is written.
    """
    if folder is not None and file is not None and Path(folder).resolve() == Path(file).resolve():
        # The file was written, then the folder failed with 'File exists': half the outputs.
        raise TokendistError(f"{file}: named both as the output folder and as the output file")
    if folder is not None:
        path = Path(folder)
        if path.exists() and not path.is_dir():
            raise TokendistError(f"{path}: exists and is not a folder")
        parent = path
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():  # --out a-file/sub: mkdir would fail with 'File exists'
            raise TokendistError(f"{path}: cannot write ({parent} is a file, not a folder)")
        if not os.access(parent if str(parent) else ".", os.W_OK):
            raise TokendistError(f"{path}: cannot write (no write permission in {parent})")
    if file is not None:
        path = Path(file)
        check_writable_file(path)
        if not path.parent.is_dir():
            raise TokendistError(f"{path}: cannot write (no folder {path.parent})")


def path_arg(text: str) -> Path:
    """A path option: not empty (``--out ''`` is ``Path('.')``: the current folder, silently)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r}")
    return Path(text)


def name_list(text: str, option: str, sep: str = ",") -> list[str]:
    """The names of a list option (``--algos fos,sos``): none empty, none twice.

    An empty item is a slip (``--algos ''`` and ``--algos ,`` ran every algorithm), a repeated one
    would run twice under one name. One trailing separator is allowed (``ring:6;kary:2,3;``).
    """
    text = text.strip()
    items = [x.strip() for x in (text[:-len(sep)] if text.endswith(sep) else text).split(sep)]
    if not all(items):
        raise TokendistError(f"{option} expects names separated by '{sep}', got {text!r} (an empty name)")
    twice = [x for i, x in enumerate(items) if x.lower() in (y.lower() for y in items[:i])]
    if twice:
        raise TokendistError(f"{option}: {twice[0]!r} given twice")
    return items


#: The largest integer an option takes: counts, steps and seeds are int64 everywhere downstream.
INT64_MAX = 2**63 - 1
# ASCII digits only, as in every spec: int() also reads '1_0', '\u0664' (Arabic-Indic four) and
# full-width digits, and float() reads them too ('1_0.5').
_INT_TEXT = re.compile(r"^[+]?[0-9]+$")
_FLOAT_TEXT = re.compile(r"^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$")


def nonneg_int(text: str) -> int:
    """An option's non-negative integer: ASCII digits, at most 2**63 - 1 (never wrapped or clipped)."""
    v = slack_int(text)
    stripped = text.strip()
    if v > INT64_MAX:
        raise argparse.ArgumentTypeError(f"expected an integer at most 2**63 - 1 ({INT64_MAX}), got {stripped[:30]}")
    return int(stripped)


def slack_int(text: str) -> int:
    """A non-negative integer in ASCII digits, of any size: a slack that is only compared with
    loads, never stored in int64 (``offline --slack 10**20`` is met at once)."""
    stripped = text.strip()
    if not _INT_TEXT.match(stripped) or len(stripped) > 4000:  # int() refuses more digits anyway
        raise argparse.ArgumentTypeError(f"expected a non-negative integer (digits 0-9), got {text[:40]!r}")
    return int(stripped)


def positive_int(text: str) -> int:
    v = nonneg_int(text)
    if v == 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got 0")
    return v


def _finite(text: str, expected: str) -> float:
    # A decimal number written in ASCII ('nan', 'inf', '1e999', '1_0' and non-ASCII digits refused).
    stripped = text.strip()
    v = float(stripped) if _FLOAT_TEXT.match(stripped) else math.nan
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return v


def probability(text: str) -> float:
    v = _finite(text, "a probability in [0, 1]")
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1], got {text!r}")
    return v


def number(text: str) -> float:
    return _finite(text, "a finite number")


def add_run_arguments(p: argparse.ArgumentParser, *, graph_default=None, init_default=None) -> None:
    p.add_argument("--graph", default=graph_default, required=graph_default is None,
                   help="topology spec, e.g. torus:16x16 (see 'tokendist graphs')")
    p.add_argument("--init", default=init_default, required=init_default is None,
                   help="initial loads: point:T[@V], uniform:T, random:A..B, ramp:A..B, file:PATH, ...")
    p.add_argument("--seed", type=nonneg_int, default=DEFAULT_SEED,
                   help=f"the one seed of the run (default {DEFAULT_SEED}, as in compare)")
    p.add_argument("--max-steps", type=nonneg_int, default=None,
                   help=f"step limit (default {DEFAULT_MAX_STEPS}, as in compare)")
    p.add_argument("--until-discrepancy", type=number, default=None, help="stop when max - min <= K")
    p.add_argument("--until-local-discrepancy", type=number, default=None,
                   help="stop when every edge's load difference is <= K")
    p.add_argument("--speeds", default=None, help="node speeds: uniform:A..B or file:PATH")
    p.add_argument("--edge-failure", type=probability, default=None,
                   help="each edge fails independently with this probability each step")
    p.add_argument("--mobility", default=None, metavar="KEY=VALUE,...",
                   help="random-waypoint mobility, e.g. radius=0.1,speed=0.001..0.005,pause=3,wrap=true")
    p.add_argument("--allow-infeasible", action="store_true",
                   help="record steps where a node sends more than it holds and continue with negative loads "
                        "(default: such a step stops the run)")
    p.add_argument("--check", action="store_true", help="verify the communication model on every step")
    p.add_argument("--record-every", type=positive_int, default=1, help="record metrics every K steps")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def dynamics_from_args(args):
    if args.edge_failure is not None and args.mobility is not None:
        raise TokendistError("choose --edge-failure or --mobility, not both")
    if args.edge_failure is not None:
        return EdgeFailures(args.edge_failure)
    if args.mobility is not None:
        if "random-waypoint" not in DYNAMICS:
            raise TokendistError("random-waypoint mobility is not available")
        return DYNAMICS.get("random-waypoint").from_options(parse_key_values([args.mobility], "--mobility"))
    return None
