"""A Markdown file's Python examples (README.md's, the docs'), run as a user with the installed
package runs them.

    python tests/support/readme_examples.py README.md --without xarray

Each ```python block is a doctest, run in order in one namespace (as pytest's
``--doctest-glob`` runs the file), with the options of ``[tool:pytest]``. A
block that imports a module named by ``--without`` is skipped, and must find
that module missing: the environment is what the caller says it is. Exit code
1 on any failure, with doctest's report. CI's package leg runs it on the
built wheel: README's, installed with the ``zarr`` extra alone; README's and
every page's of the docs, installed with the ``xarray`` extra (the one line
for xarray users).
"""

from __future__ import annotations

import argparse
import doctest
import importlib.util
import re
import sys
from pathlib import Path

FENCED_PYTHON = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
IMPORTED = re.compile(
    r"^>>> (?:import|from) ([\w.]+(?:\s+as\s+\w+)?(?:,\s*[\w.]+(?:\s+as\s+\w+)?)*)", re.M
)


def imported_modules(block: str) -> set[str]:
    """The top-level modules a block imports (``import a.b as c, d`` and ``from a import b``)."""
    modules = set()
    for names in IMPORTED.findall(block):
        for name in names.split(","):
            modules.add(name.split()[0].split(".")[0])
    return modules


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("readme", type=Path)
    parser.add_argument(
        "--without", action="append", default=[], help="a module this environment lacks"
    )
    args = parser.parse_args(argv)
    for module in args.without:
        if importlib.util.find_spec(module) is not None:
            parser.error(f"--without {module}, but {module} is installed")

    text = args.readme.read_text(encoding="utf-8")
    flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    runner = doctest.DocTestRunner(optionflags=flags)
    namespace: dict[str, object] = {"__name__": "README"}
    ran = skipped = 0
    for match in FENCED_PYTHON.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        block = match.group(1)
        needs = sorted(imported_modules(block) & set(args.without))
        if needs:
            print(f"{args.readme.name}:{line}: skipped, needs {', '.join(needs)}")
            skipped += 1
            continue
        test = doctest.DocTestParser().get_doctest(
            block, namespace, f"{args.readme.name}:{line}", str(args.readme), line
        )
        runner.run(test, clear_globs=False)
        namespace = test.globs  # a DocTest runs in a copy of the namespace it is given
        ran += 1
    failed, attempted = runner.summarize(verbose=False)
    print(
        f"{args.readme.name}: {ran} blocks run ({attempted} examples, {failed} failed), {skipped} "
        "skipped"
    )
    return 1 if failed or not ran else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
