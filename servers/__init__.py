"""The servers ringflow runs for its users: `make serve` (a Prefect server, its work pool and a worker) and `make
services` (a team's PostgreSQL, MLflow and Prefect servers and worker), supervised by one module (processes.py)."""
