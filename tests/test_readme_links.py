"""Every link README gives to the documentation site lands on a page of it: README is the index page
on GitHub and PyPI, where the docs' own Markdown would show its roles raw (issue 46).

Each link must name a page of ``docs/`` (its source); where the site was built
(``docs/_build/html``, as the docs leg of ``.ci/run`` builds it before running this test with
``NUMCODECS_BYTES_DOCS_BUILT`` set), the built page too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SITE = "https://numcodecs-bytes.readthedocs.io/en/latest/"
BUILT = ROOT / "docs" / "_build" / "html"


def site_links() -> list[str]:
    return re.findall(r"\]\((" + re.escape(SITE) + r"[^)#]*)", (ROOT / "README.md").read_text())


def test_readme_links_to_the_site_not_to_markdown_sources() -> None:
    text = (ROOT / "README.md").read_text()
    assert "/blob/main/docs/" not in text and "/blob/main/benchmarks/README.md" not in text
    assert len(site_links()) >= 10


@pytest.mark.parametrize("link", site_links())
def test_each_link_names_a_page_of_the_site(link: str) -> None:
    page = link.removeprefix(SITE) or "index.html"
    assert page.endswith(".html"), link
    assert (ROOT / "docs" / page).with_suffix(".md").exists(), f"{link}: no docs/{page[:-5]}.md"
    if os.environ.get("NUMCODECS_BYTES_DOCS_BUILT") or BUILT.exists():
        assert (BUILT / page).exists(), f"{link}: not in the built site ({BUILT / page})"


def test_the_package_metadata_points_at_the_site() -> None:
    assert f"Documentation = {SITE}" in (ROOT / "setup.cfg").read_text()
    if os.environ.get("NUMCODECS_BYTES_DOCS_BUILT"):
        assert (BUILT / "index.html").exists()
