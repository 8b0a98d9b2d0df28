"""The hosts of a launch and their slots: train.hosts ('h1:4,h2:2'), a horovodrun hostfile, or this machine."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks import paths
from tasks.launch.errors import PreflightError
from tasks.launch.hostlist import host_slots, listed, parse_hosts, rank_hosts, read_hostfile
from trainer.config import ElasticParams, TrainParams


def test_hosts_and_their_slots_are_read_in_order() -> None:
    assert list(parse_hosts("h1:4,h2:2").items()) == [("h1", 4), ("h2", 2)]


def test_a_host_without_a_count_has_one_slot() -> None:
    assert parse_hosts("h1,h2:3") == {"h1": 1, "h2": 3}


def test_a_host_named_twice_gets_the_slots_of_both() -> None:
    assert parse_hosts("h1:2,h2,h1:3") == {"h1": 5, "h2": 1}


def test_spaces_and_empty_entries_between_hosts_are_ignored() -> None:
    assert parse_hosts(" h1:2 , ,h2 ,") == {"h1": 2, "h2": 1}
    assert parse_hosts("") == {}


@pytest.mark.parametrize("entry", ["h1:x", "h1:-1", "h1:2.5", "h1:2:3"])
def test_a_slot_count_that_is_not_a_number_is_bad_input(entry: str) -> None:
    with pytest.raises(PreflightError, match=f"^bad hosts entry '{entry}': expected host or host:slots$"):
        parse_hosts(f"h0:1,{entry}")


def test_a_hostfile_gives_hosts_and_slots_past_comments_and_blank_lines(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# the cluster\nnode1 slots=4\n\nnode2 slots=2  # the small one\nnode3:3\nnode4\n")
    assert list(read_hostfile(str(hostfile)).items()) == [("node1", 4), ("node2", 2), ("node3", 3), ("node4", 1)]


@pytest.mark.parametrize("line", ["node1\tslots=4", "node1   slots=4", "node1 slots = 4"])
def test_a_hostfile_line_is_read_as_horovodrun_reads_it(tmp_path: Path, line: str) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text(line + "\n")
    assert read_hostfile(str(hostfile)) == {"node1": 4}


def test_a_missing_hostfile_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(PreflightError, match=f"^hostfile {tmp_path / 'nope'} does not exist$"):
        read_hostfile(str(tmp_path / "nope"))


def test_the_hostfile_wins_over_the_hosts_list(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("fromfile slots=3\n")
    train = TrainParams(hosts="fromlist:2", hostfile=str(hostfile))
    assert host_slots(train) == {"fromfile": 3} and listed(train)


def test_the_hosts_list_is_used_without_a_hostfile() -> None:
    train = TrainParams(hosts="h1:2,h2:2", np=4)
    assert host_slots(train) == {"h1": 2, "h2": 2} and listed(train)


def test_without_hosts_this_machine_has_a_slot_per_process() -> None:
    train = TrainParams(np=3)
    assert host_slots(train) == {"localhost": 3} and not listed(train)


def test_ranks_fill_each_host_s_slots_in_turn_up_to_np() -> None:
    assert rank_hosts(TrainParams(hosts="h1:2,h2:2,h3:4", np=5)) == ("h1", "h1", "h2", "h2", "h3")


def test_an_elastic_job_places_every_rank_there_may_be() -> None:
    train = TrainParams(hosts="h1:2,h2:2", np=2, elastic=ElasticParams(min_np=1, max_np=3))
    assert rank_hosts(train) == ("h1", "h1", "h2")


def test_ranks_on_this_machine_by_default() -> None:
    assert rank_hosts(TrainParams(np=2)) == ("localhost", "localhost")


def test_a_relative_hostfile_is_the_workspace_s_whatever_the_caller_s_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace, elsewhere = tmp_path / "workspace", tmp_path / "elsewhere"
    (workspace / "cluster").mkdir(parents=True)
    (elsewhere / "cluster").mkdir(parents=True)
    (workspace / "cluster" / "hosts").write_text("h1 slots=2\n")
    (elsewhere / "cluster" / "hosts").write_text("wrong slots=9\n")
    monkeypatch.setattr(paths, "WORKSPACE", paths.Workspace(workspace))
    monkeypatch.chdir(elsewhere)
    assert read_hostfile("cluster/hosts") == {"h1": 2}
