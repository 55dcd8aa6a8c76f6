"""zarr-python's own test suite, run with this package's codec as its ``bytes`` codec everywhere.

The suite comes from the sdist of the installed zarr, fetched by pip at run
time. It runs once with this codec (``ZARR_CODECS__BYTES`` plus
``numcodecs_bytes.zarr3`` imported: the way README gives users), then the
tests that failed are run again with zarr's own codec. A test that passes with
zarr's codec and fails with ours must be in `EXPECTED`, with its reason.

Minutes long, so it runs only where ``NUMCODECS_BYTES_ZARR_SUITE`` is set:
``1`` runs the files that exercise the ``bytes`` codec (`SELECTION`: the
codecs, sharding, indexing, properties, v3 metadata; the CI leg
``zarr-suite``, on the main and the newest stack), ``full`` the whole suite
(``.ci/run zarr-suite-full``), its property tests as zarr's CI draws them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

import pytest

zarr = pytest.importorskip("zarr")

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMCODECS_BYTES_ZARR_SUITE") not in ("1", "full"),
    reason="runs zarr-python's own test suite (minutes): NUMCODECS_BYTES_ZARR_SUITE=1 (.ci/run "
    "zarr-suite)",
)

SELECTION = [
    "tests/test_codecs",
    "tests/test_indexing.py",
    "tests/test_properties.py",
    "tests/test_metadata/test_v3.py",
]
"""The files of zarr's suite where arrays are written and read through the ``bytes`` codec (plain,
sharded, indexed every way, round trips of drawn arrays, from metadata): what CI runs. The rest
(arrays' creation and info, stores, groups, consolidation, dtypes, the v2 format, the command line)
reaches the codec in no way these do not; it runs with `.ci/run zarr-suite-full`. Their property
tests draw `EXAMPLES` examples each, the same every run."""

EXAMPLES = 50
"""Examples each of zarr's property tests draws in the selection (zarr's "ci" profile: 300, a
minute and a half a stack for 19 tests); the whole suite draws zarr's 300."""

PLUGIN_FOLDER = Path(__file__).parents[1] / "support"  # zarr_suite_plugin.py

EXPECTED: list[tuple[str, str]] = [
    (
        r"^tests/test_array\.py::TestInfo::test_info_",
        "compares an array's info with one holding an instance of zarr's own BytesCodec (zarr's "
        "class asserted)",
    ),
]
"""(pattern on the node id, reason): the tests that pass with zarr's codec and may fail with
ours."""

# Node ids holding functions' addresses, which differ between xdist workers (and between runs).
UNSTABLE_IDS = "not test_docstring_consistent_parameters"


INDEX = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
"""The package index zarr's sdist comes from (its JSON API, PEP 691)."""


def zarr_tests(folder: Path) -> Path:
    """The sdist of the installed zarr, unpacked: its ``tests`` and its pytest settings. Fetched
    from the index and checked by its SHA-256 (``pip download`` builds the sdist's metadata first:
    a minute in a clean CI environment)."""
    name = f"zarr-{zarr.__version__}.tar.gz"
    ask = urllib.request.Request(
        f"{INDEX}/zarr/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(ask, timeout=60) as answer:
        (found,) = [file for file in json.load(answer)["files"] if file["filename"] == name]
    with urllib.request.urlopen(found["url"], timeout=300) as answer:
        data = answer.read()
    assert hashlib.sha256(data).hexdigest() == found["hashes"]["sha256"], name
    sdist = folder / name
    sdist.write_bytes(data)
    with tarfile.open(sdist) as archive:
        archive.extractall(folder, filter="data")
    return folder / name.removesuffix(".tar.gz")


def run(source: Path, outcomes: Path, ours: bool, *selection: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ZARR_CODECS__BYTES"}
    env["NUMCODECS_BYTES_OUTCOMES"] = str(outcomes)
    env["HYPOTHESIS_PROFILE"] = "ci"  # derandomized: a run's verdict depends on the change
    if os.environ.get("NUMCODECS_BYTES_ZARR_SUITE") != "full":
        env["NUMCODECS_BYTES_EXAMPLES"] = str(EXAMPLES)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN_FOLDER), env.get("PYTHONPATH")]))
    if ours:
        env["ZARR_CODECS__BYTES"] = "numcodecs_bytes.zarr3.BytesCodec"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "zarr_suite_plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "-o",
        "addopts=",
        "-n",
        "2",
        "-k",
        UNSTABLE_IDS,
        *(selection or ["tests"]),
    ]
    finished = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True)
    tail = "\n".join(finished.stdout.splitlines()[-3:])
    print(f"zarr {zarr.__version__}, {'our' if ours else 'its own'} codec: {tail}")
    assert finished.returncode in (0, 1), finished.stdout[-3000:] + finished.stderr[-3000:]
    found: dict[str, str] = json.loads(outcomes.read_text())
    return found


def test_zarrs_own_suite_passes_with_this_codec_where_it_passes_with_zarrs(tmp_path: Path) -> None:
    source = zarr_tests(tmp_path)
    full = os.environ.get("NUMCODECS_BYTES_ZARR_SUITE") == "full"
    selection = [] if full else [path for path in SELECTION if (source / path).exists()]
    assert full or {"tests/test_codecs", "tests/test_indexing.py"} <= set(selection), selection
    ours = run(source, tmp_path / "ours.json", True, *selection)
    assert sum(outcome == "passed" for outcome in ours.values()) > 500, "the suite did not run"
    failed = sorted(node for node, outcome in ours.items() if outcome == "failed")
    theirs = run(source, tmp_path / "theirs.json", False, *failed) if failed else {}
    differences = [node for node in failed if theirs.get(node) == "passed"]
    unexplained = [node for node in differences if not any(re.search(p, node) for p, _ in EXPECTED)]
    counts = {
        outcome: sum(o == outcome for o in ours.values())
        for outcome in ("passed", "failed", "skipped")
    }
    print(
        f"ours: {counts}; failed with both codecs: {len(failed) - len(differences)}; differences: "
        f"{len(differences)}"
    )
    for pattern, reason in EXPECTED:
        matched = [node for node in differences if re.search(pattern, node)]
        print(f"{len(matched):4} {pattern}: {reason}")
    assert not unexplained, "pass with zarr's codec, fail with ours:\n" + "\n".join(unexplained)
