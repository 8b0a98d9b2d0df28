"""Preflight: everything that can be checked before a launch, each failure one clear line.

`check_settings` needs neither the data nor another host (the command line runs it before anything starts);
`check_launch` is the whole preflight, run once per pipeline run: the data against the model and the global batch,
then every remote host probed over ssh; its result (the launch check) travels to the launch. `dry_run_check`
contacts no host.
"""
from __future__ import annotations

import hashlib
import json
import socket
from dataclasses import dataclass
from pathlib import Path

from tasks.atomic import write_text_atomic
from tasks.launch.elastic import elastic_problem
from tasks.launch.errors import PreflightError  # noqa: F401  (raised here; callers catch it from here)
from tasks.launch.horovod_build import check_horovod
from tasks.launch.hostlist import host_slots, listed
from tasks.launch.launchers.choose import scheduler_for
from tasks.launch.remote import host_probe
from tasks.launch.remote.addresses import is_local
from tasks.launch.remote.probe import HostAnswer, interface_problem, probe_remote_hosts, remote_host_problem
from tasks.launch.remote.shared_fs import fresh_token, hosts_without_shared_fs, shared_fs_problem
from tasks.launch.remote.shipping import data_key
from tasks.outputs.export import fresh_process
from tasks.params import Params
from tasks.paths import OUTPUTS_DIR, ROOT, WORKSPACE
from tasks.user_code import code_digests, code_file, named_code
from trainer.backend_specs import backend_spec
from trainer.config import IMPORT_PATH, TrainParams
from trainer.data import model_input_shape
from trainer.models import MODEL_CATALOG
from trainer.prepared_data import MANIFEST_NAME, data_kind, data_task, output_size, read_manifest
from trainer.tuning import usable_cores

Probed = dict[str, HostAnswer]  # each remote host's answer to the probe (or its problem, in one line)


@dataclass(frozen=True)
class LaunchCheck:
    """What preflight found out for the launch: Horovod's controller (None: tf.distribute), the GPUs of the job's
    first host, the remote hosts that do not share this machine's filesystem and those of them that already hold
    this version of the data; `hosts_checked`: False for a dry run, which contacts no host."""
    controller: str | None
    gpus_per_host: int = 0
    unshared_hosts: tuple[str, ...] = ()
    hosts_with_data: tuple[str, ...] = ()
    hosts_checked: bool = True
    host_cores: tuple[tuple[str, int], ...] = ()  # each host's cores (under a scheduler: its nodes', not known yet)
    gradient_bytes: int | None = None  # the model's, as the last finished run of this config logged it


def check_slots(train: TrainParams, resolve: bool = True) -> dict[str, int]:
    """The hosts and their slots: each resolves (unless not asked), np fits in the slots it fills."""
    slots = host_slots(train)
    for host in slots if resolve else ():
        try:
            socket.gethostbyname(host)
        except OSError:
            raise PreflightError(f"host {host!r} does not resolve") from None
    spec = backend_spec(train.backend)
    placed = spec.horovod or (spec.one_process_per_slot and listed(train))
    if placed and train.np > sum(slots.values()):
        raise PreflightError(f"np {train.np} exceeds the {sum(slots.values())} slots of "
                             + ",".join(f"{h}:{n}" for h, n in slots.items()))
    return slots


SETTINGS_PASSED: dict[tuple[str, bool], str | None] = {}  # the params this process checked: their controller


def check_settings(params: Params, resolve: bool = True) -> str | None:
    """The checks that need no data and no other host, once per process for the same params (the command line
    runs them before anything starts, the run's preflight asks again). Returns Horovod's controller (None: a
    tf.distribute backend)."""
    key = (params.model_dump_json(), resolve)
    if key not in SETTINGS_PASSED:
        SETTINGS_PASSED[key] = settings_controller(params, resolve)
    return SETTINGS_PASSED[key]


def settings_controller(params: Params, resolve: bool) -> str | None:
    """Hosts and slots, the interface's name, elastic settings, Horovod's build; a Slurm job's against the cluster
    (unless not resolving): each failure raised in one line; Horovod's controller."""
    train, scheduler = params.train, scheduler_for(params)
    if scheduler and (problem := scheduler.refusal(params)):
        raise PreflightError(problem)
    slots = check_slots(train, resolve)
    on_this_machine = [host for host in slots if is_local(host)] if scheduler is None else []
    if problem := interface_problem(train.network_interface, on_this_machine, {}):
        raise PreflightError(problem)  # this machine's own interfaces; the other hosts' are asked by the probe
    if problem := elastic_problem(train, ()):
        raise PreflightError(problem)
    controller = check_horovod(train) if backend_spec(train.backend).horovod else None
    if scheduler and resolve and (problem := scheduler.cluster_problem(params, controller)):
        raise PreflightError(problem)  # the scheduler is asked (in milliseconds) like host names are resolved
    return controller


def check_data(params: Params, data_dir: Path, gpus_per_host: int) -> None:
    """The prepared data fits the model, and one global batch fits in the training split."""
    try:
        manifest = read_manifest(data_dir)
    except FileNotFoundError as error:
        raise PreflightError(str(error)) from None
    check_model(params, manifest, remember=data_dir.resolve() == WORKSPACE.prepared_dir.resolve())
    check_global_batch(params, manifest, gpus_per_host)


MODELS_REMEMBERED = 64  # builds that passed, kept in the workspace for the next runs
MODELS_BUILT: dict[str, str | None] = {}  # the user's models this process built for a data shape: why not, or None


def check_model(params: Params, manifest: dict, remember: bool = False) -> None:
    """The model fits the data: a catalog model's smallest input and no builder arguments; the user's model (and
    loss, and train.metrics) built once on the CPU, in the run's fresh TensorFlow process, where each problem of the
    user's code is one line naming its file and line. With `remember` (the workspace's own data), a build that
    passed is recorded in the workspace by its code's digests: the next runs of that code on that data shape start
    no TensorFlow process for it."""
    train, shape = params.train, model_input_shape(manifest, params.input.image_size)
    try:
        task = data_task(manifest, train.task)
    except ValueError as error:
        raise PreflightError(str(error)) from None
    if train.model in MODEL_CATALOG and data_kind(manifest) != "image":
        raise PreflightError(f"model {train.model} is the catalog's, for images; {manifest.get('source')} holds "
                             f"feature tensors of shape {tuple(shape)}: set train.model to a builder of your own "
                             "(docs/your-model.md)")
    if train.model in MODEL_CATALOG:
        needed = MODEL_CATALOG[train.model].min_size
        if min(shape[:2]) < needed:
            raise PreflightError(f"model {train.model} needs inputs of at least {needed}x{needed}; "
                                 f"the data is {shape[0]}x{shape[1]} (set input.image_size)")
        if train.model_args:
            raise PreflightError(f"model {train.model} is the catalog's: it takes no train.model_args")
        if not (train.loss or train.metrics):
            return  # nothing of the user's to check: no TensorFlow process asked
    request = {"model": train.model, "source": code_path(train.model), "input_shape": list(shape),
               "outputs": output_size(manifest, task), "model_args": train.model_args, "loss": train.loss,
               "loss_source": code_path(train.loss), "metrics": train.metrics}
    key = json.dumps([request, code_digests(params), neighbour_digests(request)], sort_keys=True, default=str)
    if key not in MODELS_BUILT:
        MODELS_BUILT[key] = None if remember and built_before(key) else fresh_process().ask("build", **request)
        if MODELS_BUILT[key] is None and remember and cacheable(params):
            remember_built(key)
    if problem := MODELS_BUILT[key]:
        raise PreflightError(problem)


def neighbour_digests(request: dict) -> dict[str, str]:
    """sha256 of the Python files beside the user's code files: the modules of their own they may import."""
    sources = {Path(source).parent for source in (request["source"], request["loss_source"]) if source}
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest()
            for folder in sorted(sources) for path in sorted(folder.glob("*.py"))}


def cacheable(params: Params) -> bool:
    """Whether a build's success may stand for the next runs: the user's code is workspace files (a package's
    modules are not followed; Keras's own losses and metrics are checked each time)."""
    named = named_code(params).values()
    return bool(named) and all(name.rpartition(":")[0].endswith(".py") for name in named)


def built_before(key: str) -> bool:
    """Whether an earlier run's preflight built this model, for this data, from this very code (each check takes a
    TensorFlow process: 4 to 5 s here)."""
    try:
        return hashlib.sha256(key.encode()).hexdigest() in json.loads(WORKSPACE.models_built.read_text())
    except (OSError, ValueError, TypeError):
        return False


def remember_built(key: str) -> None:
    """Record a build that passed (the newest MODELS_REMEMBERED)."""
    try:
        known = [str(digest) for digest in json.loads(WORKSPACE.models_built.read_text())]
    except (OSError, ValueError, TypeError):
        known = []
    known = [*known, hashlib.sha256(key.encode()).hexdigest()][-MODELS_REMEMBERED:]
    WORKSPACE.models_built.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(WORKSPACE.models_built, json.dumps(known))


def code_path(name: str | None) -> str | None:
    """The workspace file an import path names, for the build check (None: a package's module, or no code)."""
    if not name or not IMPORT_PATH.fullmatch(name) or not name.rpartition(":")[0].endswith(".py"):
        return None
    return str(code_file(name))


def check_global_batch(params: Params, manifest: dict, gpus_per_host: int) -> None:
    """One optimizer step needs a global batch of records: more than the training split holds is bad input."""
    train, records = params.train, manifest["splits"]["train"]["count"]
    spec = backend_spec(train.backend)
    global_batch = spec.global_batch(train.batch_size, train.np, gpus_per_host)
    if global_batch > records:
        replicas = spec.replicas(train.np, gpus_per_host)
        raise PreflightError(f"the global batch (train.batch_size {train.batch_size} x {replicas} "
                             f"replicas = {global_batch}) exceeds the {records} training records: "
                             f"lower train.batch_size or train.np")


def first_host_gpus(slots: dict[str, int], answers: dict[str, HostAnswer]) -> int:
    """The GPUs of the job's first host (this machine's own count when it is this machine)."""
    first = next(iter(slots))
    answer = answers.get(first)
    return int(answer["gpus"]) if isinstance(answer, dict) else host_probe.gpu_count()


def probe_hosts(data_dir: Path, hosts: list[str]) -> Probed:
    """Every remote host among `hosts` asked at once, with a fresh shared-filesystem token: each one's answer."""
    remote = [host for host in dict.fromkeys(hosts) if not is_local(host)]
    if not remote:
        return {}
    with fresh_token(OUTPUTS_DIR) as token_file:
        return probe_remote_hosts(remote, data_dir, token_file)


def check_hosts(params: Params, slots: dict[str, int], answers: Probed) -> None:
    """The first problem of the job's hosts in their answers, raised."""
    train = params.train
    problem = remote_host_problem(slots, backend_spec(train.backend).horovod, answers) \
        or shared_fs_problem(train.shared_fs, {h: a for h, a in answers.items() if isinstance(a, dict)}, ROOT) \
        or interface_problem(train.network_interface, list(slots), answers)
    if problem:
        raise PreflightError(problem)


def answers_for(data_dir: Path, slots: dict[str, int], probed: Probed | None) -> Probed:
    """The answers of the job's remote hosts: from a probe already made (a sweep probes its hosts once for all its
    trials), the hosts it did not ask probed now."""
    known = probed or {}
    asked = probe_hosts(data_dir, [host for host in slots if host not in known])
    return {host: answer for host, answer in (known | asked).items() if host in slots}


def check_launch(params: Params, data_dir: Path, probed: Probed | None = None) -> LaunchCheck:
    """The whole preflight: settings, hosts (probed over ssh, unless `probed` holds their answers), the data; all
    it found out for the launch."""
    controller = check_settings(params)  # a scheduler's checks included
    if scheduler := scheduler_for(params):
        gpus = scheduler.gpus_per_node(params)
        check_data(params, data_dir, gpus)
        return LaunchCheck(controller, gpus)
    slots = host_slots(params.train)
    answers = answers_for(data_dir, slots, probed)
    check_hosts(params, slots, answers)
    gpus = first_host_gpus(slots, answers)
    check_data(params, data_dir, gpus)
    probed_ok = {host: answer for host, answer in answers.items() if isinstance(answer, dict)}
    unshared = hosts_without_shared_fs(params.train.shared_fs, probed_ok)
    if problem := elastic_problem(params.train, unshared):
        raise PreflightError(problem)
    key = data_key(data_dir) if unshared and (data_dir / MANIFEST_NAME).is_file() else None
    with_data = tuple(host for host in unshared if probed_ok[host]["data_key"] == key)
    cores = tuple((host, int(probed_ok[host]["cores"]) if host in probed_ok else usable_cores()) for host in slots)
    return LaunchCheck(controller, gpus, unshared, with_data, host_cores=cores)


def dry_run_check(params: Params, data_dir: Path) -> LaunchCheck:
    """Preflight without contacting any host (names are not even resolved): the hosts are not checked."""
    controller = check_settings(params, resolve=False)
    if scheduler := scheduler_for(params):
        gpus = scheduler.gpus_per_node(params)
    else:
        gpus = host_probe.gpu_count() if is_local(next(iter(host_slots(params.train)))) else 0
    check_data(params, data_dir, gpus)
    return LaunchCheck(controller, gpus, hosts_checked=False)


def unchecked_hosts(params: Params) -> list[str]:
    """The remote hosts a dry run did not contact."""
    return [host for host in host_slots(params.train) if not is_local(host)]
