# tfcompose — everyday commands. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOSTS ?= inventory.yaml
BASE_IMAGE ?= tensorflow/tensorflow:latest
IMAGE ?= tfcompose-trainer:latest
PYTEST_ARGS ?=

.PHONY: help venv test sim image wheels logs status collect cluster-up cluster-down bench clean

help:  ## this list
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

venv: $(BIN)/.installed  ## create .venv with tfcompose and its dev extras

test: venv  ## run the whole test suite (unit + integration: TensorFlow, Docker, sshd)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:  ## remove the virtualenv, build output and caches
	rm -rf $(VENV) build .pytest_cache .hypothesis
