"""A name -> entry registry: one name per thing, a duplicate name is an error.

Protocols, topology families, initial distributions, metrics, reproduce entries and CLI commands
each have one :class:`Registry`; the Python API, the CLI and experiment files all use its names.
"""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

from .errors import TokendistError

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """An ordered mapping from a unique name to an entry.

    Parameters
    ----------
    kind : str
        What the entries are ("protocol", "topology", ...), used in error messages.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"duplicate {self.kind} name {name!r}")
        self._entries[name] = entry
        return entry

    def register(self, name: str):
        """Decorator form of :meth:`add`."""

        def deco(entry: T) -> T:
            self.add(name, entry)
            return entry

        return deco

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries))
            raise TokendistError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def items(self):
        return self._entries.items()

    def names(self) -> list[str]:
        return list(self._entries)
