"""Tracking: MLflow runs and what they record, the model registry and its gate, run comparison, scaling reports."""
