"""Hosts that do not share this machine's filesystem (train.shared_fs): the prepared data and the job's files go to
them over ssh before the launch, rank 0's results come back after it, and nothing of the run is left there.

Whether a host shares the filesystem is asked of it at preflight (shared_fs.py). Data is shipped once per version:
the host keeps it with its key (the manifest's digest, which names every shard's sha256) and gets it again only when
the key differs.
"""
from __future__ import annotations

import contextlib
import hashlib
import shlex
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

from tasks.launch.remote.command import RemoteError, run_on
from tasks.launch.remote.host_probe import SHIPPED_MARK
from tasks.user_code import SOURCE_DIR
from trainer.prepared_data import MANIFEST_NAME, read_manifest

SHIPPING_SECONDS = 3600  # one transfer of the data or the results; a host silent this long is lost


class ShippingError(RuntimeError):
    """Data or results could not be moved between this machine and a host; one line naming both."""


def data_key(data_dir: Path) -> str:
    """What identifies a version of the prepared data: the digest of its manifest (every shard's sha256)."""
    return hashlib.sha256((data_dir / MANIFEST_NAME).read_bytes()).hexdigest()[:32]


@dataclass(frozen=True)
class Shipment:
    """The hosts of one job that need its files, and the one whose results come back (None: rank 0 runs here).
    `guard`: a file of this machine's, fresh for the job: a host that sees it shares this machine's filesystem,
    and nothing is removed or replaced there (it would be this machine's own data and runs)."""
    hosts: tuple[str, ...]
    lead: str | None
    hosts_with_data: tuple[str, ...] = ()  # already holding this version of the data
    guard: Path | None = None


def guarded(script: str, guard: Path | None) -> str:
    """`script`, run only where the guard file is not seen (None: always)."""
    if guard is None:
        return script
    return (f"if [ -e {shlex.quote(str(guard))} ]; then echo \"this host sees this machine's files ({guard}): it "
            f"shares the filesystem, so nothing is removed or replaced there\" >&2; exit 3; fi; {script}")


def _ssh(host: str, script: str, what: str, stdin: IO[bytes] | None = None) -> None:
    try:
        run_on(host, script, what, timeout=SHIPPING_SECONDS, stdin=stdin)
    except RemoteError as error:
        raise ShippingError(str(error)) from None


def _send_tar(host: str, base: Path, names: list[str], remote_script: str, what: str) -> None:
    """Stream `names` (relative to `base`) as a tar to the host, where `remote_script` reads it on its input."""
    tar = subprocess.Popen(["tar", "-C", str(base), "-cf", "-", *names], stdout=subprocess.PIPE)
    assert tar.stdout is not None
    try:
        _ssh(host, remote_script, what, stdin=tar.stdout)
    finally:
        tar.stdout.close()
        tar.wait()
    if tar.returncode != 0:
        raise ShippingError(f"host {host}: {what} failed: tar exited with {tar.returncode}")


def shard_sums(data_dir: Path) -> str:
    """`sha256sum -c` lines for every shard the manifest names (its own record of what the data is)."""
    splits = read_manifest(data_dir).get("splits", {})
    return "".join(f"{shard['sha256']}  {shard['file']}\n" for split in splits.values()
                   for shard in split.get("shards", []) if "sha256" in shard)


def ship_data(host: str, data_dir: Path, key: str, guard: Path | None = None) -> None:
    """The prepared data to the same path on the host, into a directory of this launch's own; it takes the data's
    place, with its key as the mark of a complete copy, only once tar here exited 0 and the sha256 of every shard
    there matches the manifest (one swap at a time on the host: concurrent launches take turns)."""
    incoming = data_dir.with_name(f".{data_dir.name}.incoming-{uuid.uuid4().hex[:12]}")
    target, there = shlex.quote(str(data_dir)), shlex.quote(str(incoming))
    sums = shard_sums(data_dir)
    check = f"cd {there} && printf %s {shlex.quote(sums)} | sha256sum --check --quiet --strict - >&2 && " if sums \
        else ""
    receive = f"set -e; rm -rf {there}; mkdir -p {there}; tar -xf - -C {there}; {check}true"
    try:
        _send_tar(host, data_dir, ["."], guarded(receive, guard), f"shipping the data {data_dir}")
    except ShippingError:
        with contextlib.suppress(ShippingError):  # the host may be lost: the first failure is the one said
            _ssh(host, f"rm -rf {there}", "removing an incomplete copy of the data")
        raise
    old = shlex.quote(str(data_dir.with_name(f".{data_dir.name}.old-{uuid.uuid4().hex[:12]}")))
    stale = shlex.quote(f".{data_dir.name}.incoming-*")  # copies of launches that lost this host, a day on
    swap = (f"set -e; exec 9>{shlex.quote(str(data_dir.with_name(f'.{data_dir.name}.lock')))}; flock 9; "
            f"echo {key} > {there}/{SHIPPED_MARK}; if [ -e {target} ]; then mv -T {target} {old}; fi; "
            f"mv -T {there} {target}; rm -rf {old}; find {shlex.quote(str(data_dir.parent))} -maxdepth 1 "
            f"-name {stale} -mmin +1440 -exec rm -rf {{}} +")
    _ssh(host, guarded(swap, guard), f"putting the data in place at {data_dir}")


def _relative(path: Path) -> str:
    return str(path.resolve().relative_to("/"))


def job_file_names(config_file: Path, checkpoint_dir: Path) -> list[str]:
    """What a host of the job needs of the job's files, relative to /: the configuration file, the job's copies of
    the user's code files beside it (train.model's, train.loss's: the ranks import them from there, wherever the
    workspace they came from is) and the run's checkpoints."""
    sources = config_file.parent / SOURCE_DIR
    return [_relative(config_file)] + [_relative(path) for path in (sources, checkpoint_dir) if path.is_dir()]


def ship_job_files(host: str, config_file: Path, checkpoint_dir: Path, guard: Path | None = None) -> None:
    """The job's configuration file, its copies of the user's code and the run's checkpoints (to resume from) to
    the same paths on the host."""
    names = job_file_names(config_file, checkpoint_dir)
    script = (f"set -e; rm -rf {shlex.quote(str(checkpoint_dir))}; "
              f"mkdir -p {shlex.quote(str(checkpoint_dir))}; tar -xf - -C /")
    _send_tar(host, Path("/"), names, guarded(script, guard), "shipping the job's files")


def ship_inputs(shipment: Shipment, data_dir: Path, config_file: Path, checkpoint_dir: Path,
                on_line: Callable[[str], None]) -> None:
    """Everything the job's processes read, to every host of the shipment."""
    key = data_key(data_dir) if shipment.hosts else ""
    for host in shipment.hosts:
        if host not in shipment.hosts_with_data:
            on_line(f"shipping the prepared data to {host} (no shared filesystem)")
            ship_data(host, data_dir, key, shipment.guard)
        ship_job_files(host, config_file, checkpoint_dir, shipment.guard)


def _replace_dir(new: Path, target: Path) -> None:
    """`new` takes `target`'s place (the old one removed after)."""
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    shutil.move(str(new), str(target))
    shutil.rmtree(old, ignore_errors=True)


def _receive_tar(host: str, script: str, staging: Path, what: str) -> None:
    """Unpack into `staging` the tar that `script` writes on the host's output."""
    with subprocess.Popen(["tar", "-xf", "-", "-C", str(staging)], stdin=subprocess.PIPE) as untar:
        assert untar.stdin is not None
        try:
            run_on(host, script, what, timeout=SHIPPING_SECONDS, stdout=untar.stdin)
        except RemoteError as error:
            raise ShippingError(str(error)) from None
        finally:
            untar.stdin.close()
    if untar.returncode != 0:
        raise ShippingError(f"host {host}: {what} failed: tar exited with {untar.returncode}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def fetch_results(host: str, out_dir: Path, checkpoint_dir: Path) -> None:
    """Rank 0's model, summary, logs and checkpoints from its host into the same paths here."""
    names = " ".join(shlex.quote(_relative(path)) for path in (out_dir, checkpoint_dir))
    script = (f"cd / && set -- && for name in {names}; do if [ -e \"$name\" ]; then set -- \"$@\" \"$name\"; fi; "
              "done && tar -cf - -T /dev/null \"$@\"")  # the paths that exist, each one word
    staging = Path(tempfile.mkdtemp(prefix=".fetched-", dir=out_dir.parent))
    try:
        _receive_tar(host, script, staging, "bringing rank 0's results back")
        fetched_out = staging / _relative(out_dir)
        for entry in sorted(fetched_out.iterdir()) if fetched_out.is_dir() else []:
            _remove(out_dir / entry.name)
            shutil.move(str(entry), str(out_dir / entry.name))
        if (staging / _relative(checkpoint_dir)).is_dir():
            _replace_dir(staging / _relative(checkpoint_dir), checkpoint_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_job_files(hosts: tuple[str, ...], out_dir: Path, checkpoint_dir: Path,
                     on_line: Callable[[str], None], guard: Path | None = None) -> None:
    """Nothing of the run stays on the hosts (the data stays: the next run of it needs it); a host that cannot be
    reached, or that sees the guard (this machine's own files), is reported, not raised."""
    paths = " ".join(shlex.quote(str(path)) for path in (out_dir, checkpoint_dir))
    for host in hosts:
        try:
            _ssh(host, guarded(f"rm -rf {paths}", guard), "removing the run's files")
        except ShippingError as error:
            on_line(f"warning: {error}")


def bring_back(shipment: Shipment, out_dir: Path, checkpoint_dir: Path, on_line: Callable[[str], None],
               job_failed: bool) -> None:
    """After the job, however it ended: rank 0's results back here, then the run's files off the hosts. When the
    job failed, a failure here is reported but does not hide the job's own."""
    try:
        if shipment.lead in shipment.hosts:
            on_line(f"bringing rank 0's results back from {shipment.lead}")
            fetch_results(shipment.lead, out_dir, checkpoint_dir)
    except ShippingError as error:
        if not job_failed:
            raise
        on_line(f"warning: {error}")
    finally:
        remove_job_files(shipment.hosts, out_dir, checkpoint_dir, on_line, shipment.guard)
