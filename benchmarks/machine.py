"""Which machine a benchmark ran on: the CPU model and the caches one core sees, as Linux reports
them; and this package on it as an install leaves it (`compile_package`).

On a VM the shared cache reported may be the host's whole cache, of which the
VM gets a share: a table is only comparable with one from the same kind of VM.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

_CPU0_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def caches() -> str:
    """Per level, as cpu0 sees it: "L1d 32K, L2 1024K per core, L3 32768K shared by cpus 0-1"."""
    found = []
    for index in sorted(_CPU0_CACHES.glob("index*")):
        try:
            level, kind, size, shared = (
                (index / name).read_text().strip()
                for name in ("level", "type", "size", "shared_cpu_list")
            )
        except OSError:
            continue
        if kind == "Instruction":
            continue
        label = f"L{level}{'d' if kind == 'Data' else ''}"
        found.append(
            f"{label} {size} {'per core' if shared.isdigit() else f'shared by cpus {shared}'}"
        )
    return ", ".join(found) or "caches not reported"


def compile_package() -> None:
    """This package's modules compiled to bytecode, as installing it leaves them: the commands a
    benchmark times read them compiled.

    Where Python is told not to write what it compiles (``PYTHONDONTWRITEBYTECODE``, set on the
    developers' VMs), each command compiled ours again from a source checkout: 0.13 s a command
    here, which no installed copy pays. Where the folder is not writable, nothing is written.
    """
    import compileall

    import numcodecs_bytes

    compileall.compile_dir(os.path.dirname(numcodecs_bytes.__file__), quiet=2)


def describe() -> str:
    return f"{cpu_model()}, {os.cpu_count()} cores; {caches()}"


if __name__ == "__main__":
    print(describe())
