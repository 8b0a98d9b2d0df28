"""Prefect flows chaining ringflow's steps. Imports stay light: heavy work happens inside tasks."""
import os

# No telemetry (these machines have no route out; the temporary server's telemetry write races its SQLite).
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
