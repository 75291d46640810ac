"""Users' own protocols: ``path/to/file.py:ClassName``, ``package.module:ClassName`` and plug-ins.

Wherever a protocol name is accepted (``simulate``, ``--algo``, ``--algos``, scenario files), a
reference to a class that subclasses :class:`~tokendist.engine.Protocol` is accepted too:

* ``my_rules.py:MyRule`` -- a class in a Python file (the path is relative to the working
  directory, or absolute);
* ``my_package.rules:MyRule`` -- a class in an importable module;
* installed packages may register protocols under a name through the entry-point group
  ``tokendist.protocols`` (``[project.entry-points."tokendist.protocols"] my-rule =
  "my_package.rules:MyRule"``); they then appear in ``tokendist algos`` and ``compare`` like the
  built-in ones.

A user protocol runs under the same engine checks as the built-in ones (conservation, feasibility,
``--check`` of its declared model) and, in addition, under a contract check of what ``step``
returns, so that a broken rule fails with one line that names it, not with a traceback.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import pathlib
import sys

import numpy as np

from ..errors import TokendistError
from ._protocol import MODELS, PROTOCOLS, REQUIREMENTS, Protocol, Step

__all__ = ["make_protocol", "resolve_protocol", "is_reference", "load_plugins", "ENTRY_POINT_GROUP"]

#: The entry-point group through which installed packages register protocols.
ENTRY_POINT_GROUP = "tokendist.protocols"

_loaded_plugins = False
_plugin_errors: dict[str, str] = {}


def is_reference(algo: str) -> bool:
    """Whether ``algo`` names a class (``file.py:Class`` or ``module:Class``) rather than a registry name."""
    return isinstance(algo, str) and ":" in algo


def load_plugins() -> None:
    """Register the protocols that installed packages declare in :data:`ENTRY_POINT_GROUP` (once).

    A plug-in that fails to load does not break the other protocols: its error is kept and reported
    in one line when its name is asked for.
    """
    global _loaded_plugins
    if _loaded_plugins:
        return
    _loaded_plugins = True
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in PROTOCOLS:
            _plugin_errors[ep.name] = f"plug-in {ep.value!r} uses the name {ep.name!r} of a built-in protocol"
            continue
        try:
            cls = _checked_class(ep.load(), ep.value)
        except Exception as exc:  # noqa: BLE001 - a third-party module may raise anything on import
            _plugin_errors[ep.name] = f"plug-in protocol {ep.name!r} ({ep.value}) failed to load: {_one_line(exc)}"
            continue
        if cls.name != ep.name:
            cls = type(cls.__name__, (cls,), {"name": ep.name, "__module__": cls.__module__, "__doc__": cls.__doc__})
        PROTOCOLS.add(ep.name, cls)


def make_protocol(algo, params: dict | None = None) -> Protocol:
    """A protocol instance from a registry name, a plug-in, a class reference, or an instance (returned as is).

    Examples
    --------
    >>> make_protocol("multi-port", {"threshold": "2"}).options["threshold"]
    2
    """
    if isinstance(algo, Protocol):
        if params:
            raise TokendistError("pass parameters to the protocol's constructor, not with an instance")
        return algo
    if isinstance(algo, type) and issubclass(algo, Protocol):
        return _checked_class(algo, algo.__name__)(**(params or {}))
    if params is not None and not isinstance(params, dict):
        raise TokendistError(f"params must be a dict of parameter name -> value, got {type(params).__name__}")
    return resolve_protocol(algo)(**(params or {}))


def resolve_protocol(algo: str) -> type[Protocol]:
    """The protocol class that ``algo`` names: a registry name, a plug-in, or a class reference.

    Raises
    ------
    TokendistError
        One line: unknown name, missing file or module, no such class, or a class that is not a
        protocol.
    """
    if not isinstance(algo, str):
        raise TokendistError(f"algo must be an algorithm name, a 'file.py:Class' reference or a Protocol, "
                             f"got {type(algo).__name__}")
    if not is_reference(algo):
        if algo not in PROTOCOLS:
            load_plugins()
            if algo in _plugin_errors:
                raise TokendistError(_plugin_errors[algo])
        return PROTOCOLS.get(algo)
    target, _, attr = algo.rpartition(":")
    if not target or not attr.isidentifier():
        raise TokendistError(f"bad protocol reference {algo!r}: expected path/to/file.py:ClassName or "
                             "package.module:ClassName")
    module = _load_file(target) if target.endswith(".py") or "/" in target or "\\" in target else _import(target)
    cls = getattr(module, attr, None)
    if cls is None:
        raise TokendistError(f"{algo}: {target} has no {attr!r}")
    return _checked_class(cls, algo)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _load_file(path_text: str):
    path = pathlib.Path(path_text).expanduser()
    if not path.is_file():
        raise TokendistError(f"protocol file {path_text!r} not found")
    name = "tokendist_user_" + "".join(c if c.isalnum() else "_" for c in str(path.resolve()))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TokendistError(f"protocol file {path_text!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file may raise anything
        del sys.modules[name]
        raise TokendistError(f"protocol file {path_text!r} failed to load: {_one_line(exc)}") from None
    return module


def _import(module_name: str):
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise TokendistError(f"cannot import protocol module {module_name!r}: {_one_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001
        raise TokendistError(f"protocol module {module_name!r} failed to load: {_one_line(exc)}") from None


def _checked_class(cls, ref: str) -> type[Protocol]:
    """``cls`` if it is a usable protocol class, else a one-line error; names it after ``ref`` if unnamed."""
    if not (isinstance(cls, type) and issubclass(cls, Protocol)):
        raise TokendistError(f"{ref} is not a protocol: subclass tokendist.Protocol")
    if cls.step is Protocol.step:
        raise TokendistError(f"{ref}: the class defines no step(t, graph, loads) method")
    if cls.model not in MODELS:
        raise TokendistError(f"{ref}: model must be one of {', '.join(MODELS)}, got {cls.model!r}")
    unknown = set(cls.requires) - set(REQUIREMENTS)
    if unknown:
        raise TokendistError(f"{ref}: unknown requirements {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(REQUIREMENTS)})")
    if cls.model == "message":
        raise TokendistError(f"{ref}: user protocols run in synchronous steps (models single-port, multi-port, "
                             "flow); message-passing protocols are built in")
    name = cls.name or ref
    if name in PROTOCOLS and PROTOCOLS.get(name) is not cls:
        raise TokendistError(f"{ref}: its name {name!r} is a built-in protocol's; give the class another name")
    if cls.__module__.startswith("tokendist."):
        return cls
    # A subclass that checks the contract of every step: the user's rule is untrusted code.
    return type(cls.__name__, (cls,), {"name": name, "__module__": cls.__module__, "__doc__": cls.__doc__,
                                       "step": _contract_step(cls.step, name), "user_reference": ref})


def _contract_step(step, name):
    def checked(self, t, graph, loads):
        before = loads.sum()
        out = step(self, t, graph, loads)
        if not isinstance(out, Step):
            raise TokendistError(f"{name}: step() must return a tokendist.Step, got {type(out).__name__}")
        new = out.loads
        if not isinstance(new, np.ndarray) or new.shape != (graph.n,):
            got = getattr(new, "shape", type(new).__name__)
            raise TokendistError(f"{name}: step {t} returned loads of shape {got}, expected ({graph.n},)")
        if self.divisible:
            if new.dtype.kind != "f":
                raise TokendistError(f"{name}: a divisible protocol returns float loads, got {new.dtype}")
        elif new.dtype.kind not in "iu":
            raise TokendistError(f"{name}: step {t} returned {new.dtype} loads; tokens are integers "
                                 "(set divisible = True for a real-valued scheme)")
        if out.flows is not None and np.shape(out.flows) != (graph.m,):
            raise TokendistError(f"{name}: step {t} returned flows of shape {np.shape(out.flows)}, "
                                 f"expected ({graph.m},)")
        held = new.sum() + out.in_transit
        if (abs(float(held) - float(before)) > 1e-9 * (abs(float(before)) + graph.n)) if self.divisible \
                else held != before:
            raise TokendistError(f"{name} broke token conservation at step {t}: {before} tokens became {held}")
        return out

    checked.__doc__ = step.__doc__
    return checked
