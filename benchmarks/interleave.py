"""Timing contenders side by side (interleaved, in a new order each round, medians), and their spread over runs."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable


def median_times(ways: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Each way's median time in seconds over ``rounds`` rounds.

    Interleaved, so that drift hits every way alike, in a new order each round
    (seeded), so that every way follows every other as often: a copy right
    after a split one pays for the half of the data in the other core's cache.
    """
    times: dict[str, list[float]] = {name: [] for name in ways}
    names, order = list(ways), random.Random(0)
    for _ in range(rounds):
        order.shuffle(names)
        for name in names:
            start = time.perf_counter()
            ways[name]()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def print_spread(lines: dict[str, list[float]], width: int, unit: str = "") -> None:
    """Each line's figures over the runs, min .. max, after a heading."""
    print("\n-- spread over the runs (min .. max)")
    for name, values in lines.items():
        print(f"{name:<{width}} {min(values):.2f} .. {max(values):.2f}{unit}")
