"""A pytest plugin for runs of zarr-python's own test suite (see integration/test_zarr_suite.py).

Loaded with ``-p zarr_suite_plugin``. Where ``ZARR_CODECS__BYTES`` names this
package's class, it calls ``numcodecs_bytes.zarr3.enable()``, which makes zarr
build that class wherever it builds a ``bytes`` codec, as the config key says
(the environment variable survives the ``config.reset()`` zarr's tests run
around each test, which undoes the key ``enable()`` sets). It
records each test's outcome by node id in the JSON file that
``NUMCODECS_BYTES_OUTCOMES`` names: "failed" if any phase failed, else
"skipped" or "passed". Where ``NUMCODECS_BYTES_EXAMPLES`` is set, zarr's
property tests draw that many examples each, the same every run (zarr's "ci"
profile, which draws 300, with fewer).
"""

from __future__ import annotations

import json
import os
from typing import Any

OURS = "numcodecs_bytes.zarr3.BytesCodec"

if os.environ.get("ZARR_CODECS__BYTES") == OURS:
    import numcodecs_bytes.zarr3

    numcodecs_bytes.zarr3.enable()

_outcomes: dict[str, str] = {}


def pytest_configure(config: Any) -> None:
    # after zarr's conftest, which loads its own profile on import
    examples = os.environ.get("NUMCODECS_BYTES_EXAMPLES")
    if examples:
        from hypothesis import settings

        ci = settings.get_profile("ci")
        settings.register_profile("numcodecs-bytes", parent=ci, max_examples=int(examples))
        settings.load_profile("numcodecs-bytes")


def pytest_runtest_logreport(report: Any) -> None:
    before = _outcomes.get(report.nodeid)
    if report.failed or before == "failed":
        _outcomes[report.nodeid] = "failed"
    elif report.when == "call" or report.skipped:
        _outcomes[report.nodeid] = "skipped" if report.skipped else "passed"


def pytest_sessionfinish(session: Any) -> None:
    path = os.environ.get("NUMCODECS_BYTES_OUTCOMES")
    # the xdist controller sees every worker's reports
    if path and not hasattr(session.config, "workerinput"):
        with open(path, "w", encoding="utf-8") as file:
            json.dump(_outcomes, file, indent=0, sort_keys=True)
