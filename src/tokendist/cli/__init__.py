"""The ``tokendist`` command line: a thin shell over the Python API."""

from ._app import console, main

__all__ = ["main", "console"]
