"""Every relative Markdown link in README.md and docs/**/*.md points at a file that exists, and a
link with an #anchor at a heading of that page (GitHub's slugs)."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
# [text](target#anchor) outside code; the target up to an optional #anchor or "title".
LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]*)(?:#([^)\s]*))?(?:\s+\"[^\"]*\")?\)")


def _prose(text):
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # fenced code is not rendered as links
    return re.sub(r"`[^`\n]*`", "", text)


def _links(page):
    return [(t, a) for t, a in LINK.findall(_prose(page.read_text()))
            if (t or a) and not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def _slugs(page):
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{1,6} (.*)$", text, flags=re.M)}


CASES = [(page, target, anchor) for page in PAGES for target, anchor in _links(page)]


def test_the_pages_have_relative_links():
    assert CASES


@pytest.mark.parametrize("page, target, anchor", CASES,
                         ids=[f"{p.relative_to(ROOT).as_posix()}->{t}#{a}" for p, t, a in CASES])
def test_relative_link_points_at_an_existing_file(page, target, anchor):
    path = (page.parent / target).resolve() if target else page.resolve()
    where = page.relative_to(ROOT)
    assert path.exists(), f"{where}: link to {target} points at nothing"
    assert ROOT.resolve() in path.parents, f"{where}: {target} leaves the repository"
    if anchor and path.suffix == ".md":
        assert anchor in _slugs(path), f"{where}: {target} has no heading #{anchor}"
