"""ringflow's steps, grouped by stage: data/ (sources, conversion, validation), launch/ (plans, processes,
preflight), tracking/ (MLflow runs, registry, comparison, scaling), versioning/ (DVC, run state), outputs/
(evaluation, export, serving). steps.py is the one door the flow, the CLI and dvc.yaml go through."""
import trainer  # noqa: F401  (first: the tf-keras switch, before any TensorFlow import)
