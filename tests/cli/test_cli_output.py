"""What the command line prints of the library's messages: the flag where a message names a
parameter."""

from __future__ import annotations

import re

import pytest

from numcodecs_bytes.cli.arguments import parser
from numcodecs_bytes.cli.output import FLAGS, shown


@pytest.mark.parametrize(
    ("message", "printed"),
    [
        ("no answer within 60 s (request_timeout)", "no answer within 60 s (--request-timeout)"),
        (
            "no answer before the time limit (run_timeout)",
            "no answer before the time limit (--run-timeout)",
        ),
        (
            "reading chunk 0 fails (x); sample_check=False converts without the check",
            "reading chunk 0 fails (x); --no-sample-check converts without the check",
        ),
        (
            "left as v2 for readers on zarr-python 3.1 (oldest_zarr)",
            "left as v2 for readers on zarr-python 3.1 (--oldest-zarr)",
        ),
        ("a name like my_request_timeout_x stays", "a name like my_request_timeout_x stays"),
    ],
)
def test_a_parameter_a_message_names_is_printed_as_its_flag(message: str, printed: str) -> None:
    assert shown(message) == printed


def test_every_flag_a_message_may_name_is_one_the_command_line_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each flag a message may print is in the --help of a store command (as a user finds it)."""
    taken = set()
    for command in ("migrate", "to-v3", "reshard"):
        with pytest.raises(SystemExit):
            parser().parse_args([command, "--help"])
        taken |= set(re.findall(r"--[a-z][a-z0-9-]*", capsys.readouterr().out))
    assert set(FLAGS.values()) <= taken, set(FLAGS.values()) - taken
