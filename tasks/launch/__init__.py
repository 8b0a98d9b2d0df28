"""Launching: preflight checks, the processes of a training job (plans), and running them."""
