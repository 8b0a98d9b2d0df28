"""Sweeps for real (Prefect, Optuna, Horovod, MLflow, DVC) in a private copy of the checkout: a random sweep of 6
trials 2 at a time, recorded as child runs of one parent, the best registered and gated, and compared in MLflow's UI
in a real browser; a TPE sweep whose space is half bad prunes; bad spaces are one line. (A trial refused for bad
input: tests/flows/test_deployments.py, through the sweep's deployment.)"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import PYTHON, copy_checkout, quiet_env, run

pytestmark = pytest.mark.slow  # trials of real trainings

SPACE = {"train.learning_rate": {"low": 0.0005, "high": 0.005, "log": True}, "train.batch_size": [16, 32]}


def sweep(repo: Path, prefect_api: str, *settings: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`python -m flows.sweep --set ...` in a checkout (or a workspace, with its env); exit code and output."""
    done = run([PYTHON, "-m", "flows.sweep", *[f"--set={item}" for item in settings]], repo,
               {**(env or quiet_env()), "PREFECT_API_URL": prefect_api}, timeout=1500)
    return done.returncode, done.stdout + done.stderr


def overlapped(children: list) -> bool:
    """Every two of these runs ran at the same time for a while (trials at once)."""
    spans = sorted((child.info.start_time, child.info.end_time) for child in children)
    return all(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))


def mlflow_client(repo: Path):
    from mlflow.tracking import MlflowClient
    return MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlruns' / 'mlflow.db'}")


def runs_of(repo: Path) -> list:
    client = mlflow_client(repo)
    experiment = client.get_experiment_by_name("ringflow").experiment_id
    return list(client.search_runs([experiment], max_results=100))


@dataclass
class Swept:
    """A sweep that ran: its checkout, its exit code and output, its parent run and trials."""
    repo: Path
    code: int
    said: str
    parent: object
    children: list


def swept(repo: Path, code: int, said: str) -> Swept:
    found = runs_of(repo)
    (parent,) = [found_run for found_run in found if found_run.data.tags.get("ringflow.kind") == "sweep"]
    children = [found_run for found_run in found
                if found_run.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return Swept(repo, code, said, parent, children)


@pytest.fixture(scope="module")
def random_sweep(tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> Swept:
    """The issue's sweep: random, 6 trials, 2 at once, 3 epochs each, on this machine."""
    repo = copy_checkout(tmp_path_factory.mktemp("random-sweep") / "checkout")
    code, said = sweep(repo, prefect_api, "sweep.method=random", "sweep.trials=6", "sweep.parallel=2",
                       "sweep.pruner=none", "train.np=1", "train.epochs=3", f"sweep.space={json.dumps(SPACE)}")
    assert code == 0, said[-3000:]
    return swept(repo, code, said)


def test_a_random_sweep_of_6_trials_2_at_once(random_sweep: Swept, tmp_path: Path) -> None:
    parent, children = random_sweep.parent, random_sweep.children
    assert len(children) == 6 and {child.info.status for child in children} == {"FINISHED"}
    for child in children:
        number = child.data.tags["ringflow.sweep.trial"]
        assert re.fullmatch(rf"trial-{number}-cnn-np1-b(16|32)-lr[\d.e-]+-{child.info.run_id[:6]}",
                            child.info.run_name)
        assert "train.learning_rate" in child.data.params and child.inputs.dataset_inputs
    assert parent.inputs.dataset_inputs[0].dataset.digest == children[0].inputs.dataset_inputs[0].dataset.digest
    best_run = parent.data.tags["ringflow.sweep.best_run"]
    client = mlflow_client(random_sweep.repo)
    table = client.download_artifacts(parent.info.run_id, "trials.csv", str(tmp_path))
    rows = list(csv.DictReader(io.StringIO(Path(table).read_text())))
    assert len(rows) == 6 and all(row["val_accuracy"] for row in rows)
    artifacts = {artifact.path for artifact in client.list_artifacts(parent.info.run_id)}
    assert {"optimization_history.png", "parallel_coordinates.png"} <= artifacts
    versions = client.search_model_versions("name = 'ringflow'")
    assert [version.run_id for version in versions] == [best_run]
    assert re.search(r"^gate: +ringflow v1 is champion", random_sweep.said, re.M)
    # trials train without the test predictions and SavedModel; the best one's evaluation wrote them
    written = {child.info.run_id for child in children
               if (random_sweep.repo / "outputs" / "runs" / child.info.run_id / "model" / "savedmodel").is_dir()}
    assert written == {best_run}


def test_the_sweep_compared_in_a_real_browser(random_sweep: Swept) -> None:
    """`make ui` as a user starts it, the link it prints opened in chromium: the experiment's training runs (not
    the GenAI overview); the sweep's run expanded lists its 6 trials by name; two of them compared show both
    learning rates."""
    from tests.browser import chromium, make_ui
    expected = {child.info.run_name: child.data.params["train.learning_rate"] for child in random_sweep.children}
    with make_ui(random_sweep.repo) as link, chromium() as browser:
        browser.get(link)
        parent_row = sweep_row(browser, random_sweep.parent.info.run_name)
        assert "/runs" in browser.current_url and "Token Usage" not in page_text(browser)
        parent_row.find_element("css selector", "button[data-component-id*='runnamecellrenderer']").click()
        trials = wait_for_trials(browser, len(expected))
        assert sorted(trial.text for trial in trials) == sorted(expected)
        compared = [trial.text for trial in trials[:2]]
        for trial in trials[:2]:
            row_of(trial).find_element("css selector", "input.ag-checkbox-input").click()
        button(browser, "Compare").click()
        compare = wait_for_text(browser, "Comparing 2 Runs")
        shown = parameter_row(compare, "train.learning_rate")
        assert all(expected[name] in shown for name in compared), shown


def page_text(browser) -> str:
    return browser.find_element("tag name", "body").text


def wait_for_text(browser, text: str) -> str:
    from tests.browser import wait_for
    def shown() -> str:
        text_now = page_text(browser)
        return text_now if text in text_now else ""
    return wait_for(shown, 60, repr(text))


def row_of(element):
    return element.find_element("xpath", "./ancestor::*[@role='row'][1]")


def sweep_row(browser, name: str):
    """The row of the sweep's run in the runs table."""
    from tests.browser import wait_for
    links = wait_for(lambda: browser.find_elements("link text", name), 60, f"the run {name}")
    return row_of(links[0])


def wait_for_trials(browser, count: int) -> list:
    from tests.browser import wait_for
    def listed() -> list:
        found = browser.find_elements("partial link text", "trial-")
        return found if len(found) == count else []
    return wait_for(listed, 60, f"{count} trials")


def button(browser, label: str):
    (found,) = [element for element in browser.find_elements("tag name", "button") if element.text.strip() == label]
    return found


def parameter_row(page: str, name: str) -> str:
    """The compare view's line of one parameter: its name and each run's value."""
    (line,) = [line for line in page.splitlines() if line.startswith(f"{name} ")]
    return line


@pytest.mark.parametrize(("space", "said"), [
    ({"train.model": {"low": 1, "high": 2}},
     "train.model is not a number parameter: give a list of choices, not a range"),
    ({"train.learnin_rate": [0.1]}, "'train.learnin_rate' is not a parameter a trial can change"),
    ({"train.learning_rate": {"low": 0.1, "high": 0.01}}, "the range is empty: low 0.1 is not below high 0.01"),
])
def test_a_bad_space_is_one_line_before_anything_starts(tmp_path: Path, prefect_api: str, space: dict,
                                                        said: str) -> None:
    repo = copy_checkout(tmp_path / "checkout", prepared=False)
    code, printed = sweep(repo, prefect_api, f"sweep.space={json.dumps(space)}")
    last = printed.strip().splitlines()[-1]
    assert code == 2 and last.startswith("error: bad ") and said in last, printed[-2000:]
    assert not (repo / "data" / "prepared").exists()


def ranks_left(repo: Path) -> list[str]:
    """Training processes of the checkout still running on this machine (other tests may be training too)."""
    import subprocess
    listed = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in listed if "-m trainer" in line and str(repo) in line]


def test_a_tpe_sweep_over_a_half_bad_space_prunes(tmp_path: Path, prefect_api: str) -> None:
    repo = copy_checkout(tmp_path / "checkout")
    space = {"train.learning_rate": {"low": 0.0005, "high": 10, "log": True}}
    code, said = sweep(repo, prefect_api, "sweep.method=tpe", "sweep.trials=6", "sweep.parallel=2", "train.np=1",
                       "train.epochs=5", "sweep.prune_after_trials=2", "sweep.prune_after_epochs=1",
                       f"sweep.space={json.dumps(space)}")
    assert code == 0, said[-3000:]
    pruned = [found_run for found_run in runs_of(repo)
              if found_run.data.tags.get("ringflow.sweep.trial_state") == "pruned"]
    assert pruned and {found_run.info.status for found_run in pruned} == {"KILLED"}
    client = mlflow_client(repo)
    for found_run in pruned:
        epochs = client.get_metric_history(found_run.info.run_id, "val_accuracy")
        assert len(epochs) < 5  # stopped before its last epoch
    assert not ranks_left(repo)


def test_ctrl_c_during_a_sweep_ends_every_trial_retries_none_and_is_one_line(tmp_path: Path,
                                                                            prefect_api: str) -> None:
    """Ctrl-C (SIGINT to the terminal's process group, the sweep started with SIGINT ignored as CI may) while two
    trials train: no trial is tried again or started after it, the sweep ends `error: interrupted ...`, exit 130,
    its run FAILED, and no rank is left."""
    import os
    import signal
    import subprocess
    import time

    from tasks.errors import INTERRUPTED
    repo = copy_checkout(tmp_path / "checkout")
    settings = ["sweep.method=random", "sweep.trials=4", "sweep.parallel=2", "sweep.pruner=none", "train.np=1",
                "train.epochs=300", f"sweep.space={json.dumps(SPACE)}"]
    job = subprocess.Popen([PYTHON, "-m", "flows.sweep", *[f"--set={item}" for item in settings]], cwd=repo,
                           env={**quiet_env(), "PREFECT_API_URL": prefect_api}, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert job.stdout is not None
    said: list[str] = []
    for line in job.stdout:
        said.append(line)
        if "epoch 2:" in line or "epoch 2/" in line:  # trials are training
            break
    time.sleep(1)
    os.killpg(job.pid, signal.SIGINT)
    text = "".join(said) + job.communicate(timeout=180)[0]
    assert job.returncode == 130, text[-3000:]
    assert text.strip().splitlines()[-1] == f"error: {INTERRUPTED}"
    launches = {line.split("launching: ", 1)[1] for line in text.splitlines() if "launching: " in line}
    assert len(launches) <= 2 and "trying again" not in text, text[-3000:]  # no retry, no trial after it
    (parent,) = [found for found in runs_of(repo) if found.data.tags.get("ringflow.kind") == "sweep"]
    assert parent.info.status == "FAILED"
    assert not ranks_left(repo)


def test_trials_are_submitted_as_slots_free_up(prefect_api: str) -> None:
    """A thousand-trial sweep does not make a thousand futures: each is submitted once fewer than `at_once` run
    (Prefect's own task runner and futures, in this process); the outcomes come back by trial number."""
    import threading
    import time
    from dataclasses import dataclass as record

    from prefect import flow, task
    from prefect.logging.handlers import APILogHandler
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.sweep import trials_in_slots

    @record
    class Ended:
        number: int

    lock, counts, waiting_at_submit = threading.Lock(), {"submitted": 0, "ended": 0}, []

    @task
    def trial(number: int) -> Ended:
        time.sleep(0.3 if number % 2 else 0.1)  # they end out of order
        with lock:
            counts["ended"] += 1
        return Ended(number)

    def submit() -> object:
        with lock:
            waiting_at_submit.append(counts["submitted"] - counts["ended"])
            counts["submitted"] += 1
            number = counts["submitted"] - 1
        return trial.submit(number)

    @flow
    def paced() -> list:
        return trials_in_slots(submit, 7, 2)

    with temporary_settings({PREFECT_API_URL: prefect_api}):  # this process read its settings before the server
        outcomes = paced()
        APILogHandler().flush()  # its logs sent now, while the session's server is up
    assert [outcome.number for outcome in outcomes] == list(range(7))
    assert max(waiting_at_submit) < 2 and len(waiting_at_submit) == 7
