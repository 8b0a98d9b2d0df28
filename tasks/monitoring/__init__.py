"""Drift of the served items from the training's reference: the served log's window (window.py), the comparison in
Evidently's own venv (evidently_env.py, drift_report.py), figures, and what the monitor flow logs and decides
(monitor.py)."""
