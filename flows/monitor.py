"""The monitor flow: the model server's logged predictions of the last window (monitor.window_minutes) against the
reference the champion's training kept (its test split's same summary features and answers), compared by
Evidently; the report and figures logged to MLflow under the served version; on drift (monitor.threshold,
monitor.answer_threshold), the retraining deployment (monitor.retrain) started, once per window.

Deployed by prefect.yaml as `serving-monitor/monitor` (hourly). Run directly:
    python -m flows.monitor [--set monitor.window_minutes=30 ...] [--end 2026-11-29T10:00:00]
(`ringflow monitor` in a project.)
"""
from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any, Optional

from prefect import flow, get_run_logger
from prefect.runtime import deployment as running_deployment
from pydantic import PositiveFloat

from flows.cli import shorten_bad_input_logs
from tasks.monitoring.monitor import MonitorResult, monitor_window
from tasks.monitoring.window import Window, window_ending
from tasks.params import MonitorParams, Params, ParamsError, load_params
from tasks.tracking.server import use_tracking

shorten_bad_input_logs()
DRIFT_TAG = "drift"  # on every retraining flow run a drift started


def outcome_line(result: MonitorResult, settings: MonitorParams) -> str:
    """What the window showed, in one line."""
    if not result.version:
        return f"no version of {result.model} holds the alias champion: nothing served to monitor"
    served = f"{result.model} v{result.version}: {result.items} item(s) answered in {result.window}"
    if result.refused:
        served += f" ({result.refused} more it could not use)"
    if result.comparison is None:
        return f"{served}: fewer than monitor.min_items ({settings.min_items}): no verdict"
    verdict = "drift" if result.comparison.drifted(settings) else "no drift"
    return f"{served}: {verdict}: {result.comparison.shown(settings)}; report in MLflow run {result.run_id}"


def window_tag(result: MonitorResult) -> str:
    """The tag naming a retraining's window: one retraining per model version and window-long slot of time."""
    return f"drift-window:{result.model}:v{result.version}:{result.window.slot}"


def start_retraining(deployment: str, result: MonitorResult) -> str:
    """Start the retraining deployment for this window, unless a run of it was started for this window already
    (its tag; the idempotency key makes two monitors at once start one); the line saying which."""
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.client.schemas import FlowRun
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId, FlowRunFilter, FlowRunFilterTags
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    async def started_already() -> Any:
        async with get_client() as client:
            target = await client.read_deployment_by_name(deployment)
            found = await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[window_tag(result)])),
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[target.id])), limit=1)
            return found[0] if found else None
    try:
        earlier = asyncio.run(started_already())
    except ObjectNotFound:
        return f"drift: no deployment {deployment} on this Prefect server (make serve deploys it): no retraining " \
               "started"
    if earlier is not None:
        return f"drift: {deployment} was started for this window already (flow run {earlier.name}): not again"
    started: FlowRun = run_deployment(deployment, timeout=0, as_subflow=False,  # type: ignore[assignment]
                                      tags=[DRIFT_TAG, window_tag(result)], idempotency_key=window_tag(result))
    return f"drift: started {deployment} (flow run {started.name}); it trains when data, code or params changed " \
           "since its last run"


@flow(name="serving-monitor")
def serving_monitor(window_minutes: Optional[PositiveFloat] = None, end: Optional[datetime] = None,
                    overrides: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Compare the window's served items with the champion's reference; start the retraining on drift."""
    if overrides and running_deployment.name is not None:
        raise ParamsError("overrides: a deployment run of the monitor takes window_minutes and end; its other "
                          "settings are params.yaml's")
    given = {"monitor.window_minutes": window_minutes} if window_minutes else {}
    params = load_params({**(overrides or {}), **given})
    use_tracking(params.tracking)
    return monitor(params, window_ending(end, params.monitor.window_minutes))


def monitor(params: Params, window: Window) -> dict[str, Any]:
    """The window compared, its line said, the retraining started on drift; what the flow returns."""
    logger = get_run_logger()
    result = monitor_window(params, window)
    logger.info(outcome_line(result, params.monitor))
    drifted = result.comparison is not None and result.comparison.drifted(params.monitor)
    retraining = None
    if drifted and params.monitor.retrain:
        retraining = start_retraining(params.monitor.retrain, result)
    elif drifted:
        retraining = "drift: monitor.retrain is null: no retraining started"
    if retraining:
        logger.info(retraining)
    return {"model": result.model, "version": result.version, "items": result.items, "drift": drifted,
            "share": result.comparison.share if result.comparison else None,
            "answer_distance": result.comparison.answer_distance if result.comparison else None,
            "run_id": result.run_id, "retraining": retraining}


def main(argv: list[str] | None = None) -> int:
    from flows.cli import checked_overrides, run_flow
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--end", type=datetime.fromisoformat, default=None)
    flags, rest = parser.parse_known_args(argv)
    overrides = checked_overrides("python -m flows.monitor", __doc__, rest, lambda params: None)
    if overrides is None:
        return 2
    result, code = run_flow(lambda: serving_monitor(end=flags.end, overrides=overrides))
    if result is not None:
        print(f"monitor:        {'drift' if result['drift'] else 'no drift'} ({result['items']} items); "
              f"{result['retraining'] or 'no retraining'}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
