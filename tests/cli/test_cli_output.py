"""What the command line prints of the library's messages: the flag where a message names a parameter."""

from __future__ import annotations

from typing import Any

import pytest

from numcodecs_bytes.cli.arguments import parser
from numcodecs_bytes.cli.output import FLAGS, shown


@pytest.mark.parametrize(
    ("message", "printed"),
    [
        ("no answer within 60 s (request_timeout)", "no answer within 60 s (--request-timeout)"),
        ("no answer before the time limit (run_timeout)", "no answer before the time limit (--run-timeout)"),
        ("reading chunk 0 fails (x); verify=False converts without the check", "reading chunk 0 fails (x); --no-verify "
         "converts without the check"),
        ("left as v2 for readers on zarr-python 3.1 (oldest_zarr)", "left as v2 for readers on zarr-python 3.1 "
         "(--oldest-zarr)"),
        ("a name like my_request_timeout_x stays", "a name like my_request_timeout_x stays"),
    ],
)  # fmt: skip
def test_a_parameter_a_message_names_is_printed_as_its_flag(message: str, printed: str) -> None:
    assert shown(message) == printed


def test_every_flag_a_message_may_name_is_one_the_command_line_takes() -> None:
    commands: dict[str, Any] = parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr,assignment]
    taken = {option for command in commands.values() for action in command._actions for option in action.option_strings}
    assert set(FLAGS.values()) <= taken, set(FLAGS.values()) - taken
