"""to_v3.findings: what a room found, taken in by the run, is what recording each finding
directly would make (the run's one writer of its outcome)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from numcodecs_bytes.to_v3.findings import Findings

paths = st.sampled_from(["", ".", "a", "a/b", "a/.zmetadata"])
findings = st.one_of(
    st.tuples(st.just("fail"), paths, st.text(max_size=5)),
    st.tuples(st.just("file_stays"), paths, st.text(max_size=5)),
    st.tuples(st.just("note"), paths, st.text(max_size=5)),
    st.tuples(st.just("shards"), st.integers(0, 9), st.just("")),
    st.tuples(st.just("consolidated"), st.booleans(), st.just("")),
    st.tuples(st.just("refused"), st.sampled_from([None, "x", "y"]), st.just("")),
)


def _apply(found: Findings, what: tuple[str, object, str]) -> None:
    kind, value, why = what
    if kind in ("fail", "file_stays", "note"):
        getattr(found, kind)(value, why)
    elif kind == "shards":
        assert isinstance(value, int)
        found.report.shards += value
    elif kind == "consolidated":
        found.report.consolidated |= bool(value)
    elif found.report.server_copy_refused is None:
        found.report.server_copy_refused = value  # type: ignore[assignment]


@given(st.lists(st.lists(findings, max_size=6), max_size=4))
def test_rooms_findings_added_equal_each_finding_recorded_in_turn(
    rooms: list[list[tuple[str, object, str]]],
) -> None:
    """Rooms' findings, each room's its own value, added in the order the rooms ran: the same
    report (failures and notes in order, counts summed, flags or'ed, the first reason kept) and the
    same failed nodes as one record of every finding in turn."""
    direct = Findings()
    taken = Findings()
    for room in rooms:
        found = Findings()
        for what in room:
            _apply(direct, what)
            _apply(found, what)
        assert taken.add(found) is taken
    assert taken.report == direct.report
    assert taken.failed == direct.failed
    assert taken.failed == {
        "" if path == "." else str(path)
        for room in rooms
        for kind, path, _ in room
        if kind == "fail"
    }


def test_a_file_that_stays_fails_no_node() -> None:
    found = Findings()
    found.file_stays("a/.zgroup", "changed by someone else since it was read")
    found.fail(".", "its .zgroup is not JSON")
    assert found.failed == {""}
    assert found.report.failures == [
        ("a/.zgroup", "changed by someone else since it was read"),
        (".", "its .zgroup is not JSON"),
    ]
