# ringflow: `make run` (set-up + the pipeline on the built-in dataset), `make test` (set-up + all tests).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export TF_USE_LEGACY_KERAS := 1
export TF_CPP_MIN_LOG_LEVEL := 2
export PREFECT_HOME := $(CURDIR)/.prefect
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := 1
UI_PORT ?= 5000

.PHONY: setup run test ui serve repro clean

setup:
	@bash scripts/setup.sh

run: setup
	$(PY) -m flows.pipeline $(ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

ui: setup
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/mlruns/mlflow.db --host 127.0.0.1 --port $(UI_PORT)

serve: setup
	@bash scripts/serve.sh

repro: setup
	$(VENV)/bin/dvc repro

clean:
	rm -rf outputs data/prepared mlruns .prefect
