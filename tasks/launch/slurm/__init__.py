"""The training job as a Slurm batch job: its script, the Slurm commands and job states, following a job, and the
checks before one is submitted (tasks/launch/launchers/slurm.py is the way of starting ranks that uses them)."""
