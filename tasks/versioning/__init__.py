"""Versioning: the data in DVC (dvc.lock, remote, restore) and the state key of a run (data, code, params)."""
