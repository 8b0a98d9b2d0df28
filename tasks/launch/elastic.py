"""Horovod's elastic mode on the launch side: horovodrun's elastic arguments, the ranks' interface, and what keeps a
job from training elastically (the discovery script itself: remote/discovery.py)."""
from __future__ import annotations

from pathlib import Path

from tasks.launch.remote.addresses import head_address, interface_of, is_local
from tasks.paths import resolve_path
from trainer.backend_specs import backend_spec
from trainer.choices import chosen_controller
from trainer.config import ElasticParams, TrainParams


def elastic_arguments(elastic: ElasticParams, script: Path) -> list[str]:
    """horovodrun's elastic options: the size range, the discovery script, the cooldown of a failed host."""
    low, high = elastic.cooldown_seconds
    return ["--min-np", str(elastic.min_np), "--max-np", str(elastic.max_np), "--host-discovery-script",
            str(script), "--blacklist-cooldown-range", str(low), str(high)]


def elastic_interface(train: TrainParams, slots_by_host: dict[str, int]) -> str | None:
    """The ranks' interface in elastic mode: train.network_interface, else Horovod's own choice, which needs two
    hosts at the start; with one host, this machine's interface towards it (`lo` for this machine itself)."""
    if train.network_interface or len(slots_by_host) > 1:
        return train.network_interface
    host = next(iter(slots_by_host))
    return "lo" if is_local(host) else interface_of(head_address([host]))


def elastic_problem(train: TrainParams, unshared_hosts: tuple[str, ...]) -> str | None:
    """What keeps this job from training elastically, in one line; None when nothing does."""
    elastic = train.elastic
    if elastic is None:
        return None
    if not backend_spec(train.backend).elastic_capable:
        return f"train.elastic needs backend horovod (Keras fit in Horovod's elastic loop), not {train.backend}"
    if (chosen := chosen_controller(train.controller)) and not chosen.elastic:
        return "train.elastic needs the Gloo controller (Horovod's elastic mode has no MPI): set train.controller " \
               "to auto or gloo"
    if unshared_hosts:
        return (f"train.elastic needs a filesystem every host shares (rank 0, which saves, may move to any host): "
                f"host {unshared_hosts[0]} does not see this checkout")
    script = resolve_path(elastic.discovery_script) if elastic.discovery_script else None
    if script and not (script.is_file() and script.stat().st_mode & 0o111):
        return f"train.elastic.discovery_script {script} is not an executable file"
    return None
