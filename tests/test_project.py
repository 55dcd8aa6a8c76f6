"""The project's own promises: CI runs what the README tells users to run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from stack import benchmark, has_module

ROOT = Path(__file__).parent.parent


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start\s+```bash\n(.*?)```", readme, re.S)
    assert block, "README.md has no Quick start block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_has_exactly_two_commands() -> None:
    install_and_demo, install_and_test = quick_start_commands()
    assert "demo" in install_and_demo
    assert ".[test]" in install_and_test and "pytest" in install_and_test


def test_ci_runs_the_readme_test_command() -> None:
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert quick_start_commands()[1] in ci_lines


def run_benchmark(name: str, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """benchmarks/NAME.py's main run in this process with ``args``; what it printed."""
    assert benchmark(name).main(list(args)) == 0
    return capsys.readouterr().out


def test_the_codec_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/codec.py keeps working (quick mode: 4 KiB and 64 KiB, one round)."""
    out = run_benchmark("codec", capsys, "--quick", "--repeats", "1")
    assert "| int32 | 4 KiB | encode |" in out
    for target in ("copy-free: decode", "per call: int32 4 KiB encode", "throughput: int32 64 KiB decode"):
        assert re.search(rf"^(PASS|FAIL)  {target}", out, re.M), target


def test_the_zarr_arrays_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/zarr_arrays.py keeps working (quick mode: 4 MiB, one round)."""
    if not has_module("zarr"):
        pytest.skip("zarr is not installed")
    import zarr

    if int(zarr.__version__.split(".")[0]) < 3:
        pytest.skip("the benchmark writes Zarr v3 arrays with zarr 3")
    out = run_benchmark("zarr_arrays", capsys, "--quick", "--repeats", "1")
    assert "| memory | read | zarr native |" in out
    assert re.search(r"^(PASS|FAIL)  whole arrays: local disk read: ", out, re.M)


def test_importing_the_codec_loads_neither_the_store_tools_nor_zarr() -> None:
    import subprocess
    import sys

    code = "import sys, numcodecs_bytes; print(sorted(m for m in sys.modules if m.startswith(('numcodecs_', 'zarr'))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for module in ("migrate", "stores", "to_v3", "'zarr"):
        assert module not in loaded, loaded
    code = "from numcodecs_bytes import migrate_config; print(migrate_config({'id': 'endian'}))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == (
        "{'id': 'bytes'}"
    )
