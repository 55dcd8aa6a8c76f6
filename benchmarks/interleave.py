"""Timing contenders side by side (interleaved, in a new order each round, medians), and their
spread over runs."""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator


def balanced_orders(names: list[str], rounds: int, seed: int = 0) -> Iterator[list[str]]:
    """Each round's order: every way once, each way right after every other as often as the rounds
    allow.

    A way's time depends on the way before it (a copy right after a split one
    pays for the half of the data in the other core's cache), so a new shuffle
    each round is not enough: over 60 rounds of threads.py's five ways, seed 0
    put ours right after a split 36 times and numpy's one thread 23 times.
    Each next way is one not yet in the round that has followed the way just
    timed least often so far, ties at random (seeded).
    """
    shuffler, followed = random.Random(seed), Counter[tuple[str, str]]()
    previous: str | None = None
    for _ in range(rounds):
        left = list(names)
        shuffler.shuffle(left)  # min keeps the first of equals: ties fall at random
        round_order = []
        for _ in names:
            name = min(left, key=lambda candidate: followed[previous, candidate] if previous else 0)
            left.remove(name)
            round_order.append(name)
            if previous is not None:
                followed[previous, name] += 1
            previous = name
        yield round_order


def median_times(ways: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Each way's median time in seconds over ``rounds`` rounds.

    Interleaved, so that drift hits every way alike, in a new order each round
    (`balanced_orders`), so that every way follows every other as often.
    """
    times: dict[str, list[float]] = {name: [] for name in ways}
    for names in balanced_orders(list(ways), rounds):
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
