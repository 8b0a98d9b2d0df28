"""A sweep's search space, checked before anything starts: each entry names a parameter by its dotted name
(`train.learning_rate`) and gives a list of choices or a range (`{low, high, log}`); every value a trial could take
is a valid value of that parameter. One line names the first problem."""
from __future__ import annotations

import itertools
import math
from typing import Any

from tasks.params import Entry, Params, ParamsError, Range, SweepParams, mapping_entry, section_fields, with_overrides
from tasks.passthrough import CODE_KEYS, PASSTHROUGH_KEYS, names_code

MAX_CHOICES = 1000  # choices of one parameter
MAX_GRID = 10_000  # combinations a grid may have (a deployment run's overrides give the space: bounded)
SWEPT_SECTIONS = ("train", "input")  # the data is prepared once for the whole sweep
NOT_SWEPT = {"train.resume_from", "train.hosts", "train.hostfile", "train.scheduler", "train.scaling_np",
             "train.np", "train.backend", "train.elastic"}  # where and how a trial runs: the sweep's, not a trial's


def field_annotation(name: str) -> Any:
    """The type of the parameter a space entry names (an entry of train.model_args: a real number when given as a
    range; whole numbers or anything else as a list of choices); ParamsError for one a trial cannot change."""
    section, _, key = name.partition(".")
    if name in PASSTHROUGH_KEYS:  # whoever starts a sweep could otherwise choose a command line (docs/security.md)
        raise ParamsError(f"bad sweep space: {name} reaches a command line: it is never swept (set it in "
                          "params.yaml)")
    if (entry := mapping_entry(name)) and entry[0] in SWEPT_SECTIONS:
        return float
    if section not in SWEPT_SECTIONS or name in NOT_SWEPT or key not in section_fields(section):
        raise ParamsError(f"bad sweep space: {name!r} is not a parameter a trial can change "
                          f"(train.* or input.* of params.yaml, not {', '.join(sorted(NOT_SWEPT))})")
    return section_fields(section)[key].annotation


def check_entry(base: Params, name: str, entry: Entry) -> None:
    """Every value the entry gives is a valid value of its parameter; a range only on a number parameter."""
    annotation = field_annotation(name)
    if isinstance(entry, Range):
        if annotation not in (int, float):
            raise ParamsError(f"bad sweep space: {name} is not a number parameter: give a list of choices, "
                              "not a range")
        values: list[Any] = [entry.low, entry.high]
        if annotation is int and (entry.low != int(entry.low) or entry.high != int(entry.high)):
            raise ParamsError(f"bad sweep space: {name} takes whole numbers: low and high must be whole")
    else:
        if not entry:
            raise ParamsError(f"bad sweep space: {name} has no choices")
        if len(entry) > MAX_CHOICES:
            raise ParamsError(f"bad sweep space: {name} has {len(entry)} choices, more than {MAX_CHOICES}")
        values = entry
    for value in values:
        if name in CODE_KEYS and names_code(value):  # the space may come from whoever starts a sweep
            raise ParamsError(f"bad sweep space: {name}={value!r} names code to import and run: set the model in "
                              "params.yaml and sweep its train.model_args")
        with_value(base, {name: int(value) if annotation is int else value})


def with_value(base: Params, chosen: dict[str, Any]) -> Params:
    """The params with a trial's values; ParamsError naming the value a parameter does not take."""
    try:
        return with_overrides(base, chosen)
    except ParamsError as error:
        raise ParamsError(f"bad sweep space: {', '.join(f'{k}={v!r}' for k, v in chosen.items())}: {error}") \
            from None


def check_space(base: Params, sweep: SweepParams) -> None:
    """The whole space, before anything starts; grid needs choices only."""
    if not sweep.space:
        raise ParamsError("bad sweep space: it is empty: name at least one parameter")
    for name, entry in sweep.space.items():
        check_entry(base, name, entry)
    if sweep.method == "grid" and any(isinstance(entry, Range) for entry in sweep.space.values()):
        raise ParamsError("bad sweep space: method grid takes lists of choices, not ranges")
    if sweep.method == "grid" and grid_size(sweep) > MAX_GRID:
        raise ParamsError(f"bad sweep space: the grid has {grid_size(sweep)} combinations, more than {MAX_GRID}: "
                          "give fewer choices, or method random or tpe with sweep.trials")


def grid(sweep: SweepParams, first: int | None = None) -> list[dict[str, Any]]:
    """The combinations of the choices (method grid), in order: every one, or the first `first`."""
    names = list(sweep.space)
    choices = [sweep.space[name] for name in names]
    combinations = itertools.islice(itertools.product(*choices), first)  # never more made than asked for
    return [dict(zip(names, combination)) for combination in combinations]


def grid_size(sweep: SweepParams) -> int:
    """How many combinations the grid has (counted, not made)."""
    return math.prod(len(entry) for entry in sweep.space.values() if not isinstance(entry, Range))
