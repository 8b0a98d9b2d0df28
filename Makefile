# ringflow: `make run` (set-up + the pipeline on the built-in dataset), `make test` (set-up + all tests),
# `make test-fast` (set-up + the unit tier: everything not marked slow), `make lint` (ruff and mypy),
# `make stop` (the local Prefect server a flow started), `make serve-model` (the registry's champion over HTTP).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# the `ringflow` command (flows/command.py), acting on this checkout as a project: run as a module, so that a
# checkout sharing another's .venv runs its own code (the installed script imports the checkout that installed it)
RINGFLOW := $(PY) -m flows.command
export TF_CPP_MIN_LOG_LEVEL := 2
export PREFECT_HOME := $(CURDIR)/.prefect
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := 1
UI_PORT ?= 5000
# pytest's parallel workers for make test: its system tests wait (on servers, timeouts, outages) as well as compute;
# on 2 cores, 3 workers end the suite as soon as 4 did (22 min 21 s against 22 min 26 s, measured) and stretch each
# test less (3 tests over 90 s against 9) (make test-fast, whose tests compute, runs on 2)
TEST_WORKERS ?= 3
# a module stays on one worker; the modules that use the test cluster share one (tests/parallel.py)
PARALLEL = -n $(TEST_WORKERS)

.PHONY: setup setup-test setup-services run sweep test test-fast lint ui serve serve-model services services-down stop repro clean

setup:
	@bash scripts/setup.sh run

setup-test:
	@bash scripts/setup.sh test

setup-services:
	@bash scripts/setup.sh services

run: setup
	$(RINGFLOW) run $(ARGS)

sweep: setup
	$(RINGFLOW) sweep $(ARGS)

test: setup-test
	$(PY) -m pytest $(PARALLEL) --durations=60 $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check flows servers tasks trainer tests benchmarks
	$(VENV)/bin/mypy

test-fast: setup-test
	$(PY) -m pytest -n 2 -m "not slow" $(PYTEST_ARGS)

ui: setup
	$(RINGFLOW) ui --port $(UI_PORT)

serve: setup
	@bash scripts/serve.sh

serve-model: setup
	@$(RINGFLOW) serve-model $(ARGS)

services: setup-services
	@bash scripts/services.sh up

services-down:
	@bash scripts/services.sh down

stop:
	@$(RINGFLOW) stop

repro: setup
	$(VENV)/bin/dvc repro

clean:
	-@$(PY) -m servers.local_prefect stop 2>/dev/null
	rm -rf outputs data/prepared mlruns .prefect
