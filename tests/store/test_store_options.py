"""How a store is reached (numcodecs_bytes.store.StoreOptions): one value, checked once, for both
tools."""

from __future__ import annotations

import math
from typing import Any

import pytest

from numcodecs_bytes.store import StoreOptions, open_store


def test_the_defaults_are_the_ones_the_help_states() -> None:
    """The defaults as users read them (``--help``: 64 requests in flight, 60 s a request, no run
    limit), not the module's own constants."""
    import contextlib
    import io

    from numcodecs_bytes.cli import main

    options = StoreOptions()
    assert (options.jobs, options.storage_options, options.request_timeout) == (64, None, 60.0)
    assert options.run_timeout is None
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
        main(["to-v3", "--help"])
    text = " ".join(shown.getvalue().split())
    assert "object store (default 64)" in text and "retries included (default 60)" in text, text


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"jobs": 0}, "jobs must be a whole number of 1 or more, got 0"),
        ({"jobs": 2.5}, "jobs must be a whole number of 1 or more, got 2.5"),
        ({"jobs": True}, "jobs must be a whole number of 1 or more, got True"),
        ({"request_timeout": 0}, "request_timeout must be a number of seconds above 0, got 0"),
        (
            {"request_timeout": math.inf},
            "request_timeout must be a number of seconds above 0, got inf",
        ),
        ({"run_timeout": -1.0}, "run_timeout must be a number of seconds above 0, got -1.0"),
        ({"run_timeout": math.nan}, "run_timeout must be a number of seconds above 0, got nan"),
        ({"run_timeout": "60"}, "run_timeout must be a number of seconds above 0, got '60'"),
    ],
)
def test_each_option_is_checked_once_and_named(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        StoreOptions(**given)
    assert str(raised.value) == message


def test_storage_options_are_a_mapping() -> None:
    with pytest.raises(TypeError, match="storage_options must be a mapping, got list"):
        StoreOptions(storage_options=[("anon", True)])  # type: ignore[arg-type]


def test_a_store_is_opened_with_them(tmp_path: Any) -> None:
    (tmp_path / ".zgroup").write_text('{"zarr_format": 2}')
    store = open_store(tmp_path, StoreOptions(run_timeout=30))
    assert store.root == str(tmp_path) and store.files.deadline is not None
    assert open_store(tmp_path).files.deadline is None
