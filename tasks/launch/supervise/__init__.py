"""Supervising a running job: its processes, their lines, stopped ranks, the time limit, stopping them all."""
