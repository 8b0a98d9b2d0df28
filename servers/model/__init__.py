"""make serve-model: the registry's champion over HTTP, as TensorFlow Serving's REST API and MLflow's scoring server
speak, its images batched across requests, a new champion loaded beside it and swapped in."""
