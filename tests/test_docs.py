"""The interactive examples (``>>>`` blocks) of the docs pages give the output they show."""

import doctest
import pathlib
import re

import pytest

DOCS_DIR = pathlib.Path(__file__).parent.parent / "docs"
DOCS = sorted(DOCS_DIR.glob("**/*.md"))  # recursive: guide/, protocols/, design/ pages too
BLOCKS = [(page, i, block) for page in DOCS
          for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S))
          if ">>>" in block]


def test_the_docs_have_interactive_examples():
    assert BLOCKS


@pytest.mark.parametrize("page, index, block", BLOCKS,
                         ids=[f"{p.relative_to(DOCS_DIR).as_posix()}-{i}" for p, i, _ in BLOCKS])
def test_docs_interactive_example(page, index, block):
    name = page.relative_to(DOCS_DIR).as_posix()
    test = doctest.DocTestParser().get_doctest(block, {}, f"{name}[{index}]", str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
