"""The search over a sweep's space with Optuna: its sampler (grid, random or TPE), its pruner (the median one, or
none), a trial's values, and each epoch's metric reported as the epoch ends."""
from __future__ import annotations

import json
from typing import Any

from tasks.sweep.space import Range, SweepParams, field_annotation, grid, grid_size


def make_study(sweep: SweepParams) -> Any:
    """An in-memory Optuna study of this process (it drives every trial; the records are MLflow's)."""
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=sweep.seed) if sweep.method == "tpe" \
        else optuna.samplers.RandomSampler(seed=sweep.seed)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=sweep.prune_after_trials,
                                         n_warmup_steps=sweep.prune_after_epochs) \
        if sweep.pruner == "median" else optuna.pruners.NopPruner()
    study = optuna.create_study(direction=sweep.direction, sampler=sampler, pruner=pruner)
    if sweep.method == "grid":  # each combination queued once, in order (Optuna's GridSampler stops the study
        for values in grid(sweep, trial_count(sweep)):  # itself, which asking and telling do not allow)
            study.enqueue_trial({name: optuna_choice(value) for name, value in values.items()})
    return study


def trial_count(sweep: SweepParams) -> int:
    """How many trials the sweep runs: `trials`, or fewer when a grid has fewer combinations."""
    return min(sweep.trials, grid_size(sweep)) if sweep.method == "grid" else sweep.trials


def suggest(trial: Any, sweep: SweepParams) -> dict[str, Any]:
    """A trial's values, by dotted parameter name."""
    chosen: dict[str, Any] = {}
    for name, entry in sweep.space.items():
        if isinstance(entry, Range) and field_annotation(name) is int:
            chosen[name] = trial.suggest_int(name, int(entry.low), int(entry.high), log=entry.log)
        elif isinstance(entry, Range):
            chosen[name] = trial.suggest_float(name, entry.low, entry.high, log=entry.log)
        else:
            by_choice = {optuna_choice(value): value for value in entry}
            chosen[name] = by_choice[trial.suggest_categorical(name, list(by_choice))]
    return chosen


def optuna_choice(value: Any) -> Any:
    """A choice as Optuna holds it: a scalar as it is, a list (`input.augment_ops`) as its JSON text, which Optuna
    can store, compare and chart (a list breaks its parallel-coordinates plot)."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else json.dumps(value)
