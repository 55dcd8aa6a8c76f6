"""The documentation site as a reader meets it (issue 56, item 8): a performance page of figures a
user can act on (the lab notes linked, not pasted), copy buttons, no internal constants among the
API, the install line on the front page, code that fits a 1280 px screen, the packing drawn.

Checked on the sources; where the site was built (``docs/_build/html``, as the docs leg of
``.ci/run`` builds it before running this test with ``NUMCODECS_BYTES_DOCS_BUILT`` set), on the
built pages too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
BUILT = DOCS / "_build" / "html"
PAGES = [
    page
    for page in sorted(DOCS.glob("*.md")) + sorted(DOCS.glob("*/*.md"))
    if "_" not in page.parts[-2][:1]
]
WIDEST_CODE = 92
"""Characters of a line a reader types (a command, a doctest's input) that fit the content column at
1280 px, with both sidebars shown (checked by looking at the pages in a browser at that width);
output may scroll."""


def typed_lines(text: str) -> list[str]:
    """The lines a reader types, in the page's code blocks: every line of a ``bash`` block, the
    ``>>>`` and ``...`` lines of a ``python`` one."""
    lines, fence = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence == "bash" or (fence == "python" and line.startswith((">>> ", "... "))):
            lines.append(line)
    return lines


def built() -> bool:
    return bool(os.environ.get("NUMCODECS_BYTES_DOCS_BUILT")) or (BUILT / "index.html").exists()


def test_the_performance_page_is_figures_for_users_and_links_the_lab_notes() -> None:
    text = (DOCS / "reference" / "performance.md").read_text()
    assert "{include}" not in text and "## At a glance" in text
    assert (
        "https://github.com/numcodecs-bytes/numcodecs-bytes/blob/main/benchmarks/README.md" in text
    )
    assert len(text.splitlines()) < 80, "the lab notes belong in benchmarks/README.md"
    for internal in ("MIN_SPLIT_BYTES", "ours chose", "fcb6834"):
        assert internal not in text


def test_the_api_page_lists_no_internal_module() -> None:
    text = (DOCS / "reference" / "api.md").read_text()
    assert "zarr_versions" not in text
    if built():
        html = (BUILT / "reference" / "api.html").read_text()
        assert 'id="numcodecs_bytes.zarr_versions' not in html


def test_the_front_page_says_how_to_install_and_names_the_version_once() -> None:
    assert "pip install numcodecs-bytes" in (DOCS / "index.md").read_text()
    conf = (DOCS / "conf.py").read_text()
    assert 'html_title = "numcodecs-bytes"' in conf and "sphinx_copybutton" in conf
    if built():
        import numcodecs_bytes

        html = (BUILT / "index.html").read_text()
        assert html.count(numcodecs_bytes.__version__) <= 2, (
            "the version: in the header, and in the page's data"
        )
        title = re.search(r"<title>(.*?)</title>", html, re.S)
        assert title is not None and numcodecs_bytes.__version__ not in title.group(1)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(DOCS)))
def test_code_on_every_page_fits_the_column_at_1280_px(page: Path) -> None:
    for line in typed_lines(page.read_text()):
        assert len(line) <= WIDEST_CODE, f"{page.name}: {len(line)} characters: {line}"
    if built():
        html = (BUILT / page.relative_to(DOCS)).with_suffix(".html").read_text()
        assert "copybutton.js" in html, f"{page.name}: no copy button"


def test_the_sharding_section_draws_the_packing() -> None:
    text = (DOCS / "guides" / "v2-to-v3.md").read_text()
    section = text[text.index("## Sharding on conversion") :]
    assert "../_static/sharding.svg" in section
    drawing = (DOCS / "_static" / "sharding.svg").read_text()
    assert drawing.startswith("<svg") and "<title>" in drawing
    assert section.count("\n**") <= 2, "subsections, not a wall of bold-headed paragraphs"
    if built():
        assert (BUILT / "_images" / "sharding.svg").exists() or (
            BUILT / "_static" / "sharding.svg"
        ).exists()


def test_the_architecture_page_names_every_module_of_the_package() -> None:
    """The page of how the package is built stays the map of it: each module in its table."""
    text = (DOCS / "reference" / "architecture.md").read_text()
    package = DOCS.parent / "numcodecs_bytes"
    named = set(re.findall(r"`([\w.]+)`", text))
    missing = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        name = ".".join(parts)
        # the command line's modules are one row (cli)
        if parts[-1] not in ("__init__", "__main__") and parts[0] != "cli" and name not in named:
            missing.append(name)
    assert missing == []


@pytest.mark.parametrize("command", ["migrate", "to-v3", "reshard"])
def test_the_command_line_page_holds_each_commands_help_as_it_is(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/reference/cli.md shows each command's ``--help`` in its Markdown (readable where the
    site is not built), as the command prints it at 100 columns. Where it differs, the failure
    prints the text to put there."""
    from numcodecs_bytes.cli import main

    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit):
        main([command, "--help"])
    printed = capsys.readouterr().out.rstrip("\n")
    page = (DOCS / "reference" / "cli.md").read_text()
    section = page.split(f"## `{command}`\n", 1)[1]
    shown = section.split("```text\n", 1)[1].split("\n```", 1)[0]
    assert shown == printed, f"docs/reference/cli.md, ## `{command}`, should hold:\n{printed}"
