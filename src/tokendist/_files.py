"""Files read and written safely: bounded reads of regular files, atomic writes.

Every input file tokendist reads (graphs, loads, speeds, diffusivity matrices, scenarios) goes
through :func:`read_bytes`: a regular file only (``/dev/zero`` or a named pipe as ``file:PATH``
read until memory ran out, or blocked for ever) and no larger than a limit per kind of file, each
refused in one line. Every output file goes through :func:`atomic_path` (or :func:`atomic_dir`
for a folder of outputs): written under a temporary name in the target's directory, then renamed
over the target, so an interrupted command leaves the old file or none, never a truncated file
that reads back as a smaller valid one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from .errors import TokendistError

__all__ = ["read_bytes", "read_text", "check_writable_file", "atomic_path", "atomic_write_text", "atomic_dir",
           "GRAPH_FILE_LIMIT", "DATA_FILE_LIMIT", "SCENARIO_FILE_LIMIT"]

#: Largest graph file read (an edge list of 2**26 edges is about 1 GB).
GRAPH_FILE_LIMIT = 1 << 30
#: Largest loads, speeds or matrix file read (a value a line: tens of millions of nodes).
DATA_FILE_LIMIT = 1 << 30
#: Largest scenario (TOML) file read.
SCENARIO_FILE_LIMIT = 1 << 20


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


def read_bytes(path, what: str, limit: int, error=TokendistError) -> bytes:
    """The content of the regular file ``path``, refused in one line (``error``) when it is not one.

    Parameters
    ----------
    path : str or Path
    what : str
        What the file holds, for the message (``"graph file"``, ``"loads"``).
    limit : int
        The largest size accepted, in bytes.
    error : type
        The :class:`TokendistError` subclass raised.
    """
    if not str(path).strip():  # 'file:' with nothing after it
        raise error(f"no {what} file named (an empty path; expected file:PATH)")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{path}: is a directory, not a {what} file")
    if not stat.S_ISREG(st.st_mode):
        # A device (/dev/zero) never ends and a named pipe blocks until a writer comes.
        raise error(f"{path}: not a regular file (a device, pipe or socket); the {what} must be a file")
    if st.st_size > limit:
        raise error(f"{path}: {_size(st.st_size)}, more than the {_size(limit)} a {what} file may have")
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if len(data) > limit:  # it grew since the stat
        raise error(f"{path}: more than the {_size(limit)} a {what} file may have")
    return data


def read_text(path, what: str, limit: int, error=TokendistError) -> str:
    """:func:`read_bytes` decoded as UTF-8; binary content is refused in one line."""
    data = read_bytes(path, what, limit, error)
    if b"\x00" in data[:65536]:
        raise error(f"{path}: binary file, not a text {what} file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: binary or non-UTF-8 content at byte {exc.start}, not a text {what} file") from None


def check_writable_file(path) -> None:
    """Refuse, in one line, an output path that names no file: empty, a folder, or a device or pipe.

    The rename of :func:`atomic_path` would replace whatever ``path`` names: run as root,
    ``--save-loads /dev/null`` turned the device into a regular file. A symbolic link is followed
    (``/dev/stdout`` is one, to a terminal or a pipe).
    """
    if not str(path).strip():
        raise TokendistError(f"{str(path)!r}: an output file needs a name")
    try:
        st = os.stat(path)
    except OSError:
        return  # absent (or its folder is): the write says why, in one line
    if stat.S_ISDIR(st.st_mode):
        raise TokendistError(f"{path}: is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise TokendistError(f"{path}: not a regular file (a device, pipe or socket); tokendist writes only files")


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success rename it over ``path``, else remove it.

    The rename (``os.replace``) is atomic within a directory, so readers see the old file or the
    whole new one; on any exception, Ctrl-C included, the temporary file is removed and ``path``
    is untouched. Refused in one line when the directory cannot be written, or when ``path`` is a
    folder, a device or a pipe (:func:`check_writable_file`); a symbolic link is written through.
    """
    check_writable_file(path)
    # Through a symbolic link to the file it names, as a shell's '>' writes: the rename would
    # otherwise replace the link itself with a regular file.
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=folder)
    except OSError as exc:
        raise TokendistError(f"{path}: cannot write ({exc.strerror or exc})") from None
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        try:
            tmp.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise TokendistError(f"{path}: cannot write ({exc.strerror or exc})") from None


@contextlib.contextmanager
def atomic_dir(out):
    """Yield a temporary folder beside ``out``; on success move its files into ``out``, else remove it.

    A command that writes a set of files (trace, summary, plot) writes them into the temporary
    folder; only when all are written are they renamed into ``out`` (created if needed), one
    ``os.replace`` each. An interrupted command leaves ``out`` as it was (and no empty ``out`` it
    created).
    """
    out = Path(out)
    parent = out.parent if str(out.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=parent))
    except OSError as exc:
        raise TokendistError(f"{out}: cannot write ({exc.strerror or exc})") from None
    try:
        yield tmp
        out.mkdir(parents=True, exist_ok=True)
        for f in sorted(tmp.iterdir()):
            os.replace(f, out / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
