"""The command-line tool in a process of its own, with file operations slowed down so that a test
can watch a run, interrupt it or kill it halfway."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


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


def stopped_tool(step: str, calls: int = 1) -> str:
    """Code for ``python -c`` that runs ``numcodecs-bytes`` (its arguments follow the code) and
    stops the process dead, as a killed machine stops it, right after the ``calls``-th return of
    ``step`` (``module:attribute``, e.g.
    ``numcodecs_bytes.to_v3.removal.removals:Removals.mark``): no cleanup, no handler, exit code
    137."""
    module, _, attribute = step.partition(":")
    *owners, name = attribute.split(".")
    return (
        "import importlib, os, sys\n"
        f"owner = importlib.import_module({module!r})\n"
        f"for part in {owners!r}:\n    owner = getattr(owner, part)\n"
        f"original, done = getattr(owner, {name!r}), []\n"
        "def stopped(*args, **kwargs):\n"
        "    result = original(*args, **kwargs)\n"
        "    done.append(1)\n"
        f"    if len(done) >= {calls!r}:\n        os._exit(137)\n"
        "    return result\n"
        f"setattr(owner, {name!r}, stopped)\n"
        "from numcodecs_bytes.cli import console; sys.argv[0] = 'numcodecs-bytes'; "
        "sys.exit(console())"
    )


def paused_past_its_lease(
    pid: int, lease: float, meanwhile: Callable[[], _T], seen: list[_T]
) -> Callable[[], None]:
    """A fault's hook: the process ``pid`` stopped (SIGSTOP) for longer than 60% of its lease of
    ``lease`` seconds (another run may take its lock over), ``meanwhile`` run then and what it
    returned kept in ``seen``; the process goes on (SIGCONT) whatever happened meanwhile."""

    def hook() -> None:
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(0.6 * lease + 1)
            seen.append(meanwhile())
        finally:
            os.kill(pid, signal.SIGCONT)

    return hook
