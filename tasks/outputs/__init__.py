"""Outputs of a trained model: evaluation on the test split, the SavedModel export, the MLflow serving wrapper."""
