"""examples/own-image-model end to end under MultiWorkerMirrored (under Horovod it runs in a project of its own:
tests/flows/test_project.py): its model.py (a subclassed Keras model with its own train_step, in the workspace,
outside ringflow's packages) on its PNG folder through `python -m flows.pipeline` in a private copy of the checkout:
FINISHED, both ranks' weights equal, the model registered as champion, and the model server answers an image with a
class."""
from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path

import pytest

from tests.examples.test_examples import module
from tests.helpers import PYTHON, copy_checkout, free_port, quiet_env, run, wait_for_http
from tests.servers.model.test_server import call, start
from trainer.protocol import weights_digests

pytestmark = pytest.mark.slow  # the whole pipeline and the model server
NAME = "own-image-model"


def test_a_subclassed_model_of_the_user_s_own_runs_the_pipeline_and_is_served(
        tmp_path: Path, prefect_api: str, backend: str = "multiworker") -> None:
    from mlflow.tracking import MlflowClient
    repo = copy_checkout(tmp_path / "checkout")
    images = module(repo / "examples" / NAME / "make_data.py").make_data(repo / "examples" / NAME / "data" /
                                                                          "digits-png", 30)
    shutil.copy(repo / "examples" / NAME / "params.yaml", repo / "params.yaml")  # as its README runs it
    done = run([PYTHON, "-m", "flows.pipeline", "--set", f"train.backend={backend}"], repo,
               quiet_env(PREFECT_API_URL=prefect_api))
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    (run_id,) = re.findall(r"^mlflow run id:\s+(\S+)$", done.stdout, re.M)
    digests = [digest for _, digest in weights_digests(said)]
    assert len(digests) == 2 and len(set(digests)) == 1, said[-2000:]  # both ranks' weights equal
    uri = f"sqlite:///{repo / 'mlruns' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(run_id).info.status == "FINISHED"
    assert client.get_run(run_id).data.params["model.source"].startswith(f"examples/{NAME}/model.py:build@")
    assert client.get_model_version_by_alias("ringflow", "champion").run_id == run_id
    port, log = free_port(), tmp_path / "server.log"
    process = start(uri, port, log)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", 120, process)
        image = base64.b64encode((images / "7" / "000.png").read_bytes()).decode()
        status, answer, _ = call(f"http://127.0.0.1:{port}/v1/models/ringflow:predict",
                                 {"instances": [{"b64": image}]})
        assert status == 200 and len(answer["predictions"]) == 1, answer
    finally:
        process.terminate()
        process.wait(30)
