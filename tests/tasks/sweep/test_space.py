"""A sweep's search space is checked before anything starts: one line for each kind of bad entry."""
from __future__ import annotations

import pytest

from tasks.params import Params, ParamsError, load_params
from tasks.sweep.space import Range, SweepParams, check_space, grid, with_value


def checked(space: dict, method: str = "tpe") -> None:
    check_space(Params(), SweepParams.model_validate({"method": method, "space": space}))


def test_the_default_space_and_a_mixed_one_are_good() -> None:
    check_space(Params(), SweepParams())
    checked({"train.learning_rate": {"low": 0.0001, "high": 0.1, "log": True}, "train.epochs": {"low": 2, "high": 5},
             "train.model": ["cnn", "small_cnn"], "input.augment": ["on", "off"]})


def test_the_user_model_s_arguments_are_swept_each_by_its_dotted_name() -> None:
    """train.model_args.units: one entry of the builder's keyword arguments; a trial gets it beside the others."""
    checked({"train.model_args.units": [32, 64], "train.model_args.rate": {"low": 0.1, "high": 0.5}})
    base = load_params({"train.model_args": {"units": 16, "depth": 2}})
    assert with_value(base, {"train.model_args.units": 64}).train.model_args == {"units": 64, "depth": 2}


@pytest.mark.parametrize(("space", "said"), [
    ({"train.learnin_rate": [0.1]}, "'train.learnin_rate' is not a parameter a trial can change"),
    ({"data.val_fraction": [0.1]}, "'data.val_fraction' is not a parameter a trial can change"),
    ({"train.resume_from": ["abc"]}, "'train.resume_from' is not a parameter a trial can change"),
    ({"train.np": [1, 2]}, "'train.np' is not a parameter a trial can change"),
    # a pass-through value reaches a command line: whoever starts a sweep must not choose it (docs/security.md)
    ({"train.horovodrun_args": [["--mpi-args=-x A=$(id>/tmp/proof)"]]},
     "train.horovodrun_args reaches a command line: it is never swept"),
    ({"train.elastic.discovery_script": ["/tmp/x.sh"]}, "train.elastic.discovery_script reaches a command line"),
    ({"slurm.sbatch_args": [["--wrap=id"]]}, "slurm.sbatch_args reaches a command line"),
    # as would code of their choice to import and call
    ({"train.model": ["cnn", "os.path:join"]}, "train.model='os.path:join' names code to import and run"),
    ({"train.loss": ["mse", "models/x.py:loss"]}, "train.loss='models/x.py:loss' names code to import and run"),
    ({"train.model": {"low": 1, "high": 2}}, "train.model is not a number parameter: give a list of choices"),
    ({"train.precision": {"low": 1, "high": 2}}, "train.precision is not a number parameter"),
    ({"train.batch_size": []}, "train.batch_size has no choices"),
    ({"train.batch_size": [32, 0]},
     "train.batch_size=0: bad parameter train.batch_size: Input should be greater than or equal to 1"),
    ({"train.model": ["cnn", "resnet9000"]},
     "train.model='resnet9000': bad parameter train.model: unknown model 'resnet9000'"),
    ({"train.epochs": {"low": 1.5, "high": 3}}, "train.epochs takes whole numbers"),
    ({}, "it is empty"),
])
def test_a_bad_space_is_one_line_naming_the_entry(space: dict, said: str) -> None:
    with pytest.raises(ParamsError) as raised:
        checked(space)
    assert str(raised.value).startswith("bad sweep space: ") and said in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(("entry", "said"), [
    ({"low": 0.1, "high": 0.1}, "the range is empty: low 0.1 is not below high 0.1"),
    ({"low": 0, "high": 1, "log": True}, "a log range needs low above 0"),
])
def test_an_empty_range_is_refused_as_it_is_read(entry: dict, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        Range.model_validate(entry)


def test_grid_takes_choices_only_and_lists_every_combination() -> None:
    with pytest.raises(ParamsError, match="method grid takes lists of choices, not ranges"):
        checked({"train.learning_rate": {"low": 0.001, "high": 0.1}}, method="grid")
    sweep = SweepParams(method="grid", space={"train.batch_size": [16, 32], "train.model": ["cnn", "small_cnn"]})
    assert grid(sweep) == [{"train.batch_size": 16, "train.model": "cnn"},
                           {"train.batch_size": 16, "train.model": "small_cnn"},
                           {"train.batch_size": 32, "train.model": "cnn"},
                           {"train.batch_size": 32, "train.model": "small_cnn"}]


def test_a_sweep_is_bounded_however_its_space_and_count_are_given() -> None:
    """A deployment run's overrides give the space and the trial count: a grid beyond 10,000 combinations, a
    parameter with more than 1,000 choices, more than 1,000 trials or 64 at once are one line (no grid is made)."""
    with pytest.raises(ParamsError) as refused:
        checked({"train.batch_size": list(range(1, 201)), "train.epochs": list(range(1, 201))}, method="grid")
    assert str(refused.value) == ("bad sweep space: the grid has 40000 combinations, more than 10000: give fewer "
                                  "choices, or method random or tpe with sweep.trials")
    with pytest.raises(ParamsError, match="train.batch_size has 1001 choices, more than 1000"):
        checked({"train.batch_size": list(range(1, 1002))})
    for setting in ({"sweep.trials": 1001}, {"sweep.parallel": 65}):
        with pytest.raises(ParamsError, match="less than or equal to"):
            load_params(setting)
