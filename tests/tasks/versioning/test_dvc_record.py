"""What dvc.lock may record: only runs made with params.yaml's values; any other run leaves it alone and says why."""
from __future__ import annotations

import pytest

from tasks.params import ParamsError, load_params
from tasks.versioning.dvc_record import check_versionable, dvc_record_blockers, record_outputs


def test_a_run_with_params_yaml_s_values_has_nothing_against_recording() -> None:
    params = load_params()
    assert dvc_record_blockers(params) == []
    check_versionable(params)


def test_each_stage_param_that_differs_from_params_yaml_is_named() -> None:
    written = load_params()
    params = load_params({"train.epochs": str(written.train.epochs + 1),
                          "input.augment": "false" if written.input.augment else "true"})
    assert dvc_record_blockers(params) == ["input.augment", "train.epochs"]
    said = record_outputs(params, ("train",))  # leaves dvc.lock alone: no DVC command runs
    assert said == "dvc.lock left alone: input.augment, train.epochs differ from params.yaml"


def test_data_overrides_cannot_be_versioned() -> None:
    params = load_params({"data.min_shards": str(load_params().data.min_shards + 1)})
    with pytest.raises(ParamsError, match="^data.\\* overrides cannot be versioned by DVC: change them in params"):
        check_versionable(params)
