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

# --- image and simulation ------------------------------------------------------------------
# The image builds with no network inside the build: docker/fetch-wheels.sh downloads, on this
# machine, the wheels the trainer needs on top of BASE_IMAGE.
image:  ## build the trainer image (BASE_IMAGE=..., IMAGE=...)
	bash docker/fetch-wheels.sh $(BASE_IMAGE)
	docker buildx build --load -f docker/Dockerfile --build-arg BASE_IMAGE=$(BASE_IMAGE) -t $(IMAGE) .

compose.yaml: compose/templates/simulation.yaml.j2 compose/templates/service.yaml.j2 launcher/render.py
	$(BIN)/python -m launcher.render

sim: image  ## the two-container CPU simulation; results in runs/local/
	TFC_IMAGE=$(IMAGE) docker compose up --no-build --exit-code-from chief; \
	  code=$$?; docker compose down --remove-orphans >/dev/null 2>&1; exit $$code

sim-down:  ## stop and remove the simulation's containers and network
	docker compose down --remove-orphans

logs:  ## follow the chief's output: the cluster's when HOSTS is given or inventory.yaml exists, else the simulation's
	@if [ "$(origin HOSTS)" = "command line" ] || [ "$(origin HOSTS)" = "environment" ] || [ -f "$(HOSTS)" ]; then \
	  $(BIN)/tfcompose logs -i $(HOSTS); else docker compose logs -f chief; fi
