"""The run directory's record of running process groups (``pgroups``, ADR-0050): slot files written in
place, what ``resume`` lists after a dead controller, and the layout before it (a file per pgid)."""

from __future__ import annotations

import threading
from pathlib import Path

from controller.services.execution.pgroups import RECORD_BYTES, GroupRegistry


def test_a_group_is_listed_while_recorded_and_its_slot_is_reused_once_cleared(tmp_path: Path) -> None:
    registry = GroupRegistry(tmp_path / "pgroups")
    assert registry.list() == []
    for pgid in range(1000, 1050):
        registry.record(pgid, f"sh -c 'echo {pgid}'")
        assert registry.list() == [(pgid, f"sh -c 'echo {pgid}'")]
        registry.clear(pgid)
        assert registry.list() == []
    files = list((tmp_path / "pgroups").iterdir())
    assert [f.name for f in files] == ["slot-0"]  # one file, written over: none created per command
    assert files[0].stat().st_size == RECORD_BYTES


def test_groups_running_at_once_get_a_slot_each(tmp_path: Path) -> None:
    registry = GroupRegistry(tmp_path / "pgroups")
    barrier = threading.Barrier(8)

    def run(pgid: int) -> None:
        barrier.wait()
        registry.record(pgid, f"command {pgid}")

    threads = [threading.Thread(target=run, args=(pgid,)) for pgid in range(200, 208)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert registry.list() == [(pgid, f"command {pgid}") for pgid in range(200, 208)]
    registry.clear(203)
    assert [pgid for pgid, _ in registry.list()] == [200, 201, 202, 204, 205, 206, 207]


def test_a_new_registry_keeps_what_a_dead_one_recorded_until_it_is_cleared(tmp_path: Path) -> None:
    """A controller killed with a command running leaves its slot written; the next one (``resume``)
    lists it, writes its own commands to other slots, and blanks it once the group is dealt with."""
    dead = GroupRegistry(tmp_path / "pgroups")
    dead.record(111, "left running")
    dead.record(112, "ended")
    dead.clear(112)
    resumed = GroupRegistry(tmp_path / "pgroups")
    assert resumed.list() == [(111, "left running")]
    resumed.record(222, "the next command")
    resumed.record(223, "and one beside it")
    assert resumed.list() == [(111, "left running"), (222, "the next command"), (223, "and one beside it")]
    resumed.clear(111)
    assert resumed.list() == [(222, "the next command"), (223, "and one beside it")]
    assert len(list((tmp_path / "pgroups").iterdir())) == 3


def test_a_long_command_is_cut_to_the_record_and_the_pgid_survives(tmp_path: Path) -> None:
    registry = GroupRegistry(tmp_path / "pgroups")
    registry.record(4242, "é" * 1000)  # 2,000 bytes of UTF-8: more than a record holds
    [(pgid, command)] = registry.list()
    assert pgid == 4242 and command.startswith("éé") and len(command.encode()) < RECORD_BYTES


def test_the_layout_before_slots_is_listed_and_cleared(tmp_path: Path) -> None:
    directory = tmp_path / "pgroups"
    directory.mkdir()
    (directory / "333").write_text("recorded by an older crucible")
    registry = GroupRegistry(directory)
    registry.record(444, "new")
    assert registry.list() == [(333, "recorded by an older crucible"), (444, "new")]
    registry.clear(333)
    assert registry.list() == [(444, "new")]
    assert not (directory / "333").exists()
