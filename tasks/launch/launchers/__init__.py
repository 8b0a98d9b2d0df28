"""The ways to start a job's processes, one module each; choose.py picks the one of a job."""
