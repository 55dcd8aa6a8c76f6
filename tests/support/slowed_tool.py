"""The command-line tool in a process of its own, with file operations slowed down so that a test
can watch a run, interrupt it or kill it halfway."""

from __future__ import annotations


def slowed_tool(seconds: float, *names: str, batch: int | None = None) -> str:
    """Code for ``python -c`` that runs ``numcodecs-bytes`` (its arguments follow the code) with
    each ``os.NAME`` taking ``seconds`` longer (and, where given, walks of ``batch`` folders at a
    time: tens of folders make two batches, where a thousand would take).

    Ctrl-C acts as a terminal's: a process started in the background (as CI may start the tests)
    inherits SIGINT ignored, and Python then installs no KeyboardInterrupt for it.
    """
    return (
        "import os, signal, sys, time\nsignal.signal(signal.SIGINT, "
        f"signal.default_int_handler)\nfor name in {names!r}:\n    setattr(os, name, lambda *a, "
        f"_f=getattr(os, name), **k: (time.sleep({seconds!r}), _f(*a, **k))[1])\n"
        + (f"import numcodecs_bytes.store.files as files; files.BATCH = {batch}\n" if batch else "")
        + "from numcodecs_bytes.cli import console; sys.argv[0] = 'numcodecs-bytes'; "
        "sys.exit(console())"
    )
