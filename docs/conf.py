"""Sphinx configuration for the numcodecs-bytes documentation site.

``pip install ".[docs]"`` then ``sphinx-build -W --keep-going docs docs/_build/html``. The data
type table and the exit codes are generated from the code at build time (``_generated/``), so they
say what the installed package does; the command line's ``--help`` texts are in
``reference/cli.md`` itself, held to the code by a test (tests/test_docs_site.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numcodecs_bytes

project = "numcodecs-bytes"
copyright = "numcodecs-bytes contributors"
release = version = numcodecs_bytes.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "numpydoc", "sphinx_copybutton"]
# numpydoc loads autosummary, which asks for .rst
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "_generated", "README.md"]  # _generated: included by pages, not pages
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
html_theme = "pydata_sphinx_theme"
html_title = "numcodecs-bytes"  # the header shows the version beside it (templates/version.html)
html_static_path = ["_static"]
html_css_files = ["custom.css"]
templates_path = ["_templates"]
html_theme_options = {
    # three sections in the header, one row; the sidebar shows the section's pages
    "navbar_start": ["navbar-logo", "version"],
    "navbar_align": "left",
    "header_links_before_dropdown": 4,
    "navigation_depth": 2,
    "show_toc_level": 2,
    "github_url": "https://github.com/numcodecs-bytes/numcodecs-bytes",
    "icon_links_label": "Links",
}
html_sidebars = {"index": [], "getting-started": []}  # pages with no section to navigate
autodoc_member_order = "bysource"
# the page's table of contents names convert_store, not its whole path
toc_object_entries_show_parents = "hide"
# Copy buttons copy what a reader types: a doctest's input lines without their prompts, no output.
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = True
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
nitpicky = False


def _generate(folder: Path) -> None:
    """The command line's exit codes and the data type table, from the package."""
    from numcodecs_bytes.__main__ import EXIT_CODES, data_type_table

    folder.mkdir(exist_ok=True)
    (folder / "dtypes.txt").write_text(data_type_table() + "\n")
    rows = "".join(f"| {code} | {meaning} |\n" for code, meaning in EXIT_CODES.items())
    (folder / "exit-codes.md").write_text(f"| code | meaning |\n| --- | --- |\n{rows}")


sys.path.insert(0, str(Path(__file__).parent))
_generate(Path(__file__).parent / "_generated")
