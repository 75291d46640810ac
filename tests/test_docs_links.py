"""Every relative Markdown link in README.md and docs/**/*.md points at a file that exists."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
# [text](target) outside code spans; the target up to an optional #anchor or "title".
LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]*)(?:#[^)\s]*)?(?:\s+\"[^\"]*\")?\)")


def _links(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # fenced code is not rendered as links
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in LINK.findall(text) if t and not re.match(r"[a-z][a-z0-9+.-]*:", t)]


CASES = [(page, target) for page in PAGES for target in _links(page)]


def test_the_pages_have_relative_links():
    assert CASES


@pytest.mark.parametrize("page, target", CASES,
                         ids=[f"{p.relative_to(ROOT).as_posix()}->{t}" for p, t in CASES])
def test_relative_link_points_at_an_existing_file(page, target):
    path = (page.parent / target).resolve()
    assert path.exists(), f"{page.relative_to(ROOT)}: link to {target} points at nothing"
    assert ROOT.resolve() in path.parents or path == ROOT.resolve(), f"{page.relative_to(ROOT)}: {target} leaves the repository"
