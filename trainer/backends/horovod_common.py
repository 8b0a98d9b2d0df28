"""What the Horovod backends (`horovod` with Keras fit, elastic or not, and `horovod-tape`) answer alike: joining
the ranks, who leads, the plan of one replica per rank, the agreed resume."""
from __future__ import annotations

import os
import socket
from typing import Any

import horovod.tensorflow as hvd_tf
import tensorflow as tf

from trainer import session, tuning
from trainer.backends.horovod_keras import hvd
from trainer.config import TrainerConfig
from trainer.loop import Backend
from trainer.protocol import placed_line


def own_gpu(local_rank: int, visible: int) -> int:
    """The visible GPU a rank takes: its local rank's, where it sees all of its host's (horovodrun, mpirun, srun
    with --gpus-per-node); its only one, where the scheduler gave each task its own (srun with --gpus-per-task sets
    CUDA_VISIBLE_DEVICES per task, and "GPU number local rank" would not exist)."""
    return local_rank % visible


def start(config: TrainerConfig) -> dict[str, Any]:
    """Join the ranks (with the job's Horovod cycle and fusion buffer), pin devices, share the host's cores, seed;
    returns what the rank applied of the job's tuning (trainer/tuning.py)."""
    job = config.job
    os.environ.update(tuning.horovod_environment(tuning.HorovodCycle(job.cycle_time_ms, job.fusion_threshold_mb)))
    hvd.init()  # Horovod: join the ranks
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[own_gpu(hvd.local_rank(), len(gpus))], "GPU")  # Horovod: one GPU per rank
    threads = tuning.rank_threads(config.train, tuning.usable_cores(), hvd.local_size())  # Horovod: share the cores
    tf.config.threading.set_intra_op_parallelism_threads(threads.intra_op)
    tf.config.threading.set_inter_op_parallelism_threads(threads.inter_op)
    tf.keras.utils.set_random_seed(config.train.seed + hvd.rank())  # Horovod: distinct init, dropout, shuffling
    where = placed_line(hvd.rank(), hvd.size(), socket.gethostname(), os.getpid())  # Horovod: where each rank is
    print(where, flush=True)
    applied = tuning.RankThreads(tf.config.threading.get_intra_op_parallelism_threads(),
                                 tf.config.threading.get_inter_op_parallelism_threads(), threads.data)
    return tuning.resolved(applied, tuning.applied_cycle(os.environ))


def compression(config: TrainerConfig) -> type:
    """Gradient compression for the allreduce: fp16 when configured, else none."""
    return hvd.Compression.fp16 if config.train.fp16_allreduce else hvd.Compression.none


def averaging_optimizer(optimizer: tf.keras.optimizers.Optimizer, config: TrainerConfig) -> Any:
    """Horovod's DistributedOptimizer, averaging the gradients once however a model's train_step applies them:
    Horovod averages in `minimize` (Keras's own train_step), but a train_step of the user's own that computes its
    gradients with a tape and calls `apply_gradients` would train each rank apart; here the average is taken in
    `apply_gradients`, which every way ends in, and `minimize` passes the plain gradients on."""
    distributed = hvd.DistributedOptimizer(optimizer, compression=compression(config))  # Horovod: averaged
    horovods = type(distributed)  # Horovod's class for this optimizer's: its methods call super(self.__class__)
    plain: Any = horovods.__mro__[1]  # the optimizer's own class (Adam)
    horovods_apply = horovods.__dict__["apply_gradients"]

    def _compute_gradients(self: Any, loss: Any, var_list: Any, grad_loss: Any = None, tape: Any = None) -> Any:
        return plain._compute_gradients(self, loss, var_list, grad_loss=grad_loss, tape=tape)

    def apply_gradients(self: Any, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
        pairs = list(grads_and_vars)
        variables = [variable for _, variable in pairs]
        averaged = self._allreduce([grad for grad, _ in pairs], variables)  # Horovod: the average over ranks
        return horovods_apply(self, list(zip(averaged, variables)), *args, **kwargs)
    methods = {"_compute_gradients": _compute_gradients, "apply_gradients": apply_gradients}
    distributed.__class__ = type(horovods.__name__, (plain,), {**horovods.__dict__, **methods})
    return distributed


class Horovod(Backend):
    """The loop's answers every Horovod backend shares (trainer/loop.py)."""

    def start(self, config: TrainerConfig) -> dict[str, Any]:
        return start(config)

    def lead(self) -> bool:
        return hvd.rank() == 0  # Horovod: rank 0 reports and writes (of the current ring, when elastic)

    def who(self) -> str:
        return f"rank={hvd.rank()}"

    def plan(self, config: TrainerConfig) -> session.Plan:
        return session.plan(config, processes=hvd.size())  # Horovod: one replica and input pipeline per rank

    def agree(self, epochs_done: int) -> int:
        """Rank 0's count for every rank (all see the run's checkpoint directory)."""
        return hvd_tf.broadcast_object(epochs_done, root_rank=0)  # Horovod: one answer for all ranks

    def communication(self, model: tf.keras.Model, history: dict[str, list[float]],
                      run: session.Plan) -> dict[str, float] | None:
        if hvd.size() < 2:
            return None
        from trainer.communication import measured
        return measured(model, history, run.global_batch,
                        lambda tensor: hvd_tf.allreduce(tensor, op=hvd_tf.Average))  # Horovod: a step's collective


def average_over_ranks(values: tf.Tensor) -> tf.Tensor:
    """Element-wise sum over ranks (eager)."""
    return hvd_tf.allreduce(values, op=hvd_tf.Sum)  # Horovod: sum over ranks
