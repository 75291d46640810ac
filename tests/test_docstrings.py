"""The ``Examples`` sections of the package's docstrings give the output they show."""

import doctest
import importlib
import pkgutil

import pytest

import tokendist

MODULES = sorted(info.name for info in pkgutil.walk_packages(tokendist.__path__, "tokendist.")
                 if not info.name.endswith("__main__"))
FINDER = doctest.DocTestFinder(exclude_empty=True)
TESTS = [(name, test) for name in MODULES for test in FINDER.find(importlib.import_module(name), name)
         if test.examples and test.name.startswith(name)]  # each example once, in its own module


def test_the_package_has_docstring_examples():
    assert len(TESTS) >= 20


@pytest.mark.parametrize("name, test", TESTS, ids=[t.name for _, t in TESTS])
def test_docstring_example(name, test):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
