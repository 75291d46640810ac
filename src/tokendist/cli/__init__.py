"""The ``tokendist`` command line: a thin shell over the Python API."""

from ._app import main

__all__ = ["main"]
