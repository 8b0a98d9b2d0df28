"""Shipping to hosts without the shared filesystem: the data once per version, the job's files, rank 0's results
back, nothing of the run left there. Run against this machine (its `sh` in place of the host's) and a host that
ssh cannot reach."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tasks.launch.remote import shipping
from tasks.launch.remote.host_probe import SHIPPED_MARK
from tasks.launch.remote.shipping import (
    Shipment,
    ShippingError,
    bring_back,
    data_key,
    fetch_results,
    remove_job_files,
    ship_data,
    ship_inputs,
    ship_job_files,
)
from trainer.prepared_data import MANIFEST_NAME

LOST = "nosuchhost.invalid"
LOST_LINE = rf"host {LOST} cannot be reached by ssh without a password: ssh: Could not resolve hostname"


def files_under(directory: Path) -> dict[str, str]:
    """relative path -> text, of every file under `directory`."""
    return {path.relative_to(directory).as_posix(): path.read_text()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def inodes(*paths: Path) -> set[int]:
    """Which files these are (a file replaced by a copy is another one)."""
    return {path.stat().st_ino for path in paths}


def make_files(directory: Path, files: dict[str, str]) -> Path:
    """`directory` holding `files` (relative path -> text)."""
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return directory


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Prepared data (a manifest and a shard) at a path the shell must be given quoted."""
    return make_files(tmp_path / "prepared data", {MANIFEST_NAME: json.dumps({"shards": {"train-0": "aa"}}),
                                                   "train-0.tfrecord": "records\n"})


@pytest.fixture
def run_dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A run's output and checkpoint directories, with files in them."""
    return make_run_dirs(tmp_path / "job-1")


def make_run_dirs(job_dir: Path) -> tuple[Path, Path]:
    """A job's output and checkpoint directories in `job_dir`."""
    out_dir = make_files(job_dir / "model", {"summary.json": "{}", "savedmodel/saved.pb": "graph"})
    checkpoint_dir = make_files(job_dir / "checkpoints", {"ckpt-2.index": "two", "checkpoint": "ckpt-2"})
    return out_dir, checkpoint_dir


def test_the_data_key_follows_the_manifest(data_dir: Path) -> None:
    key = data_key(data_dir)
    assert len(key) == 32 and int(key, 16) >= 0 and data_key(data_dir) == key
    (data_dir / "train-0.tfrecord").write_text("not named by the manifest\n")
    assert data_key(data_dir) == key
    (data_dir / MANIFEST_NAME).write_text(json.dumps({"shards": {"train-0": "bb"}}))
    assert data_key(data_dir) != key


def test_shipped_data_arrives_whole_with_its_key(data_dir: Path, tmp_path: Path) -> None:
    """To this machine, the same path: the copy takes the data's place and carries the key a probe reads."""
    before = files_under(data_dir)
    ship_data("localhost", data_dir, "0123abcd")
    assert files_under(data_dir) == before | {SHIPPED_MARK: "0123abcd\n"}
    assert sorted(path.name for path in tmp_path.iterdir()) == [".prepared data.lock", "prepared data"]  # no .incoming
    # nor .old left


def test_data_for_a_host_ssh_cannot_reach_is_one_line(data_dir: Path) -> None:
    before = files_under(data_dir)
    with pytest.raises(ShippingError, match=f"^{LOST_LINE}"):
        ship_data(LOST, data_dir, data_key(data_dir))
    assert files_under(data_dir) == before


def test_job_files_for_a_host_ssh_cannot_reach_is_one_line(tmp_path: Path, run_dirs: tuple[Path, Path]) -> None:
    config_file = make_files(tmp_path, {"config.yaml": "train: {}\n"}) / "config.yaml"
    with pytest.raises(ShippingError, match=f"^{LOST_LINE}"):
        ship_job_files(LOST, config_file, run_dirs[1])


def test_the_job_s_copies_of_the_user_s_code_go_with_its_files(tmp_path: Path) -> None:
    """train.model's file, copied beside the job's configuration, reaches a host without the shared filesystem
    (the workspace it came from may be nowhere there)."""
    job_dir = make_files(tmp_path / "job", {"config.yaml": "train: {}\n", "model_source/model_net.py": "x = 1\n"})
    names = shipping.job_file_names(job_dir / "config.yaml", tmp_path / "no checkpoints")
    assert names == [str((job_dir / name).relative_to("/")) for name in ("config.yaml", "model_source")]


def test_a_job_file_that_cannot_be_read_fails_the_shipping(tmp_path: Path) -> None:
    """tar here fails on the missing file, though the host took what came: the job does not start without it."""
    with pytest.raises(ShippingError, match=r"^host localhost: shipping the job's files failed: tar exited with 2$"):
        ship_job_files("localhost", tmp_path / "missing.yaml", tmp_path / "checkpoints")


def test_inputs_are_data_then_job_files_for_each_host(data_dir: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    with pytest.raises(ShippingError, match=f"^{LOST_LINE}"):
        ship_inputs(Shipment((LOST,), LOST), data_dir, tmp_path / "config.yaml", tmp_path / "ckpt", lines.append)
    assert lines == [f"shipping the prepared data to {LOST} (no shared filesystem)"]


def test_a_host_holding_the_data_gets_only_the_job_files(data_dir: Path, tmp_path: Path) -> None:
    config_file = make_files(tmp_path, {"config.yaml": "train: {}\n"}) / "config.yaml"
    lines: list[str] = []
    with pytest.raises(ShippingError, match=f"^{LOST_LINE}"):
        ship_inputs(Shipment((LOST,), LOST, hosts_with_data=(LOST,)), data_dir, config_file, tmp_path / "ckpt",
                    lines.append)
    assert lines == []


def test_no_hosts_nothing_shipped_nor_read(tmp_path: Path) -> None:
    """Not even the manifest: a job on shared storage may have none yet."""
    lines: list[str] = []
    ship_inputs(Shipment((), None), tmp_path / "no data", tmp_path / "config.yaml", tmp_path / "ckpt", lines.append)
    assert lines == []


def test_results_come_back_whole(run_dirs: tuple[Path, Path]) -> None:
    """From this machine, the same paths: what comes back (new files, same contents) takes the place of what was
    here."""
    out_dir, checkpoint_dir = run_dirs
    before = (files_under(out_dir), files_under(checkpoint_dir))
    inodes_before = inodes(out_dir / "summary.json", out_dir / "savedmodel", checkpoint_dir)
    fetch_results("localhost", out_dir, checkpoint_dir)
    assert (files_under(out_dir), files_under(checkpoint_dir)) == before
    assert all(inode not in inodes_before for inode in inodes(out_dir / "summary.json", out_dir / "savedmodel",
                                                               checkpoint_dir))
    assert sorted(path.name for path in out_dir.parent.iterdir()) == ["checkpoints", "model"]  # no staging left


def test_results_come_back_to_a_path_with_a_space(tmp_path: Path) -> None:
    out_dir, checkpoint_dir = make_run_dirs(tmp_path / "job 1")
    before = (files_under(out_dir), files_under(checkpoint_dir))
    fetch_results("localhost", out_dir, checkpoint_dir)
    assert (files_under(out_dir), files_under(checkpoint_dir)) == before


def test_results_without_checkpoints_leave_none(run_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    out_dir, _ = run_dirs
    fetch_results("localhost", out_dir, tmp_path / "no checkpoints")
    assert "summary.json" in files_under(out_dir) and not (tmp_path / "no checkpoints").exists()


def test_results_from_a_host_ssh_cannot_reach_is_one_line(run_dirs: tuple[Path, Path]) -> None:
    out_dir, checkpoint_dir = run_dirs
    before = files_under(out_dir)
    with pytest.raises(ShippingError, match=f"^{LOST_LINE}"):
        fetch_results(LOST, out_dir, checkpoint_dir)
    assert files_under(out_dir) == before
    assert sorted(path.name for path in out_dir.parent.iterdir()) == ["checkpoints", "model"]


def test_the_runs_files_are_removed_from_the_hosts(tmp_path: Path, data_dir: Path) -> None:
    """A host that cannot be reached is a warning; the others are still cleaned, and the data stays."""
    out_dir, checkpoint_dir = make_run_dirs(tmp_path / "job 1")
    lines: list[str] = []
    remove_job_files((LOST, "localhost"), out_dir, checkpoint_dir, lines.append)
    assert not out_dir.exists() and not checkpoint_dir.exists() and data_dir.is_dir()
    assert len(lines) == 1 and re.match(f"warning: {LOST_LINE}", lines[0])


def test_rank_0_here_nothing_comes_back_but_the_hosts_are_cleaned(run_dirs: tuple[Path, Path]) -> None:
    out_dir, checkpoint_dir = run_dirs
    before = files_under(out_dir)
    lines: list[str] = []
    bring_back(Shipment((LOST,), None), out_dir, checkpoint_dir, lines.append, job_failed=False)
    assert files_under(out_dir) == before
    assert len(lines) == 1 and lines[0].startswith(f"warning: host {LOST} cannot be reached by ssh")


def test_results_lost_after_a_good_job_are_raised_and_hosts_cleaned(run_dirs: tuple[Path, Path]) -> None:
    lines: list[str] = []
    with pytest.raises(ShippingError, match=f"^{LOST_LINE}"):
        bring_back(Shipment((LOST,), LOST), *run_dirs, lines.append, job_failed=False)
    assert lines[0] == f"bringing rank 0's results back from {LOST}"
    assert len(lines) == 2 and lines[1].startswith(f"warning: host {LOST} cannot be reached by ssh")


def test_results_lost_after_a_failed_job_are_a_warning(run_dirs: tuple[Path, Path]) -> None:
    """The job's own failure is the one raised: the fetch's and the cleaning's are warnings."""
    lines: list[str] = []
    bring_back(Shipment((LOST,), LOST), *run_dirs, lines.append, job_failed=True)
    assert lines[0] == f"bringing rank 0's results back from {LOST}" and len(lines) == 3
    assert all(line.startswith(f"warning: host {LOST} cannot be reached by ssh") for line in lines[1:])


def test_a_directory_takes_the_place_of_another(tmp_path: Path) -> None:
    new = make_files(tmp_path / "new", {"a": "new a"})
    target = make_files(tmp_path / "target", {"a": "old a", "b": "old b"})
    shipping._replace_dir(new, target)
    assert files_under(target) == {"a": "new a"} and sorted(p.name for p in tmp_path.iterdir()) == ["target"]
    shipping._replace_dir(make_files(tmp_path / "newer", {"c": "c"}), tmp_path / "absent")
    assert files_under(tmp_path / "absent") == {"c": "c"}


def test_paths_go_to_the_host_relative_to_its_root(tmp_path: Path) -> None:
    assert shipping._relative(tmp_path / "a" / ".." / "b") == str((tmp_path / "b").resolve())[1:]


def test_a_removed_entry_is_a_file_a_directory_or_a_link_not_its_target(tmp_path: Path) -> None:
    kept = make_files(tmp_path / "kept", {"f": "f"})
    (tmp_path / "link").symlink_to(kept)
    make_files(tmp_path, {"dir/x": "x", "file": "y"})
    for name in ("link", "dir", "file", "missing"):
        shipping._remove(tmp_path / name)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kept"] and files_under(kept) == {"f": "f"}


def real_data(directory: Path, shards: dict[str, str]) -> Path:
    """Prepared data whose manifest names each shard's sha256, as prepare writes it."""
    make_files(directory, shards)
    files = [{"file": name, "count": 1, "sha256": hashlib.sha256(text.encode()).hexdigest()}
             for name, text in shards.items()]
    (directory / MANIFEST_NAME).write_text(json.dumps({"splits": {"train": {"count": len(files), "shards": files}}}))
    return directory


def test_data_whose_shard_does_not_match_the_manifest_is_not_put_in_place(tmp_path: Path) -> None:
    """The copy on the host is checked shard by shard against the manifest before it takes the data's place."""
    data_dir = real_data(tmp_path / "prepared", {"train-0.tfrecord": "records\n", "train-1.tfrecord": "more\n"})
    (data_dir / "train-1.tfrecord").write_text("changed after prepare\n")
    before = files_under(data_dir)
    with pytest.raises(ShippingError, match=r"^host localhost: shipping the data .* failed \(exit 1\): sha256sum: "
                                            r"WARNING: 1 computed checksum did NOT match$"):
        ship_data("localhost", data_dir, data_key(data_dir))
    assert files_under(data_dir) == before  # no mark: not taken for a complete copy
    assert sorted(path.name for path in tmp_path.iterdir()) == ["prepared"]  # no incoming copy left


def test_nothing_is_replaced_or_removed_on_a_host_that_sees_this_machine_s_files(
        data_dir: Path, tmp_path: Path) -> None:
    """This machine itself, taken for a host without the shared filesystem: it sees the guard, so neither the
    data nor the run's files (this machine's own) are touched; the removal is a warning."""
    guard = make_files(tmp_path, {"guard": "fresh"}) / "guard"
    out_dir, checkpoint_dir = make_run_dirs(tmp_path / "job 1")
    before = (files_under(data_dir), files_under(out_dir), files_under(checkpoint_dir))
    with pytest.raises(ShippingError, match=r"^host localhost: shipping the data .* failed \(exit 3\): this host "
                                            r"sees this machine's files \(.*guard\): it shares the filesystem"):
        ship_data("localhost", data_dir, data_key(data_dir), guard)
    with pytest.raises(ShippingError, match=r"\(exit 3\): this host sees this machine's files"):
        ship_job_files("localhost", out_dir / "summary.json", checkpoint_dir, guard)
    lines: list[str] = []
    remove_job_files(("localhost",), out_dir, checkpoint_dir, lines.append, guard)
    assert len(lines) == 1 and "this host sees this machine's files" in lines[0]
    assert (files_under(data_dir), files_under(out_dir), files_under(checkpoint_dir)) == before
