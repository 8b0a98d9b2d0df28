"""Prefect flows chaining ringflow's steps. Imports stay light: heavy work happens inside tasks."""
