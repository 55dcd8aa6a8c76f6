"""The project's own promises: CI runs what the README tells users to run."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest
from stack import benchmark, has_module

ROOT = Path(__file__).parent.parent


def setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def bash_block(section: str) -> list[str]:
    """The commands of the first bash block under README.md's ``## section``."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(rf"^## {section}\n(?:(?!^## ).)*?```bash\n(.*?)```", readme, re.S | re.M)
    assert block, f"README.md has no bash block under ## {section}"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_install_is_by_the_package_name_then_the_demo() -> None:
    assert bash_block("Install") == ["pip install numcodecs-bytes", "python -m numcodecs_bytes demo"]


def test_ci_runs_the_readme_test_command() -> None:
    (test_command,) = bash_block("Development")
    assert ".[test,interop]" in test_command and "pytest" in test_command
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_readme_links_are_absolute_and_those_into_the_repository_name_its_files() -> None:
    """README.md is the package's page on the index too, where a relative link leads nowhere."""
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)]*)\)", readme)
    assert links and all(link.startswith("https://") for link in links), links
    urls = dict(line.split(" = ") for line in setup_cfg()["metadata"]["project_urls"].strip().splitlines())
    for link in links:
        if link.startswith(urls["Source"] + "/blob/main/"):
            assert (ROOT / link.removeprefix(urls["Source"] + "/blob/main/")).is_file(), link
    assert urls["Source"] in links


def test_extras_as_readme_lists_them() -> None:
    extras = setup_cfg()["options.extras_require"]
    readme = (ROOT / "README.md").read_text()
    for extra in ("zarr", "xarray", "s3", "ml_dtypes"):
        assert f"`numcodecs-bytes[{extra}]`" in readme, extra
    assert "s3fs" in extras["s3"]
    # The test extra holds no package that only CI's legs need; those are in interop.
    for ci_only in ("tensorstore", "zarrs", "moto", "s3fs", "distributed", "zarr-any-numcodecs"):
        assert ci_only not in extras["test"] and ci_only in extras["interop"], ci_only


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


def test_the_bool_check_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/bool_check.py keeps working, every way writing the right bytes (1 MiB, one run)."""
    out = run_benchmark("bool_check", capsys, "--sizes", "1")
    for way in ("split copy", "ours", "two passes", "one pass"):
        assert re.search(rf"^1 MiB {way} +\d+\.\d\d \.\. \d+\.\d\d$", out, re.M), way


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
