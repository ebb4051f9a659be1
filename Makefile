# tfcompose — everyday commands. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TFC := $(BIN)/tfcompose
HOSTS ?= inventory.yaml
BASE_IMAGE ?= tensorflow/tensorflow:latest
IMAGE ?= tfcompose-trainer:latest
PYTEST_ARGS ?=

.PHONY: help venv test test-unit docs docs-serve sim sim-down image logs validate render preflight status collect cluster-up cluster-down bench clean

help:  ## this list
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(BIN)/.launcher

# The launcher alone (no TensorFlow): what the cluster targets need.
$(BIN)/.launcher: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e .
	touch $@

venv: $(BIN)/.installed  ## create .venv with tfcompose and its dev extras

# Lanes (pytest-xdist): whole modules, the longest first (tests/support/lanes.py). LANES=0: one.
# The fast set waits more than it computes (timeouts, sampler periods): three lanes on two cores.
LANES ?= 2
UNIT_LANES ?= 3
lane_args = $(if $(filter 0,$(1)),,-n $(1) --dist loadgroup --no-loadscope-reorder)
LANE_ARGS := $(call lane_args,$(LANES))

test: venv  ## run the whole test suite (import contracts, unit + integration: TensorFlow, Docker, sshd)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest $(LANE_ARGS) $(PYTEST_ARGS)

test-unit: venv  ## the fast set: import contracts, then no TensorFlow, no Docker, no sshd
	$(BIN)/lint-imports
	$(BIN)/python -m pytest tests/unit $(call lane_args,$(UNIT_LANES)) $(PYTEST_ARGS)

# The documentation site (mkdocs.yml; docs/ is its source, the reference pages are written from the code).
DOCS_ENV := NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true

docs: venv  ## build the documentation site into site/ (strict: a broken link fails)
	$(DOCS_ENV) $(BIN)/mkdocs build --strict

docs-serve: venv  ## serve the documentation on http://127.0.0.1:8000/, rebuilt as you edit
	$(DOCS_ENV) $(BIN)/mkdocs serve

clean:  ## remove the virtualenv, build output and caches
	rm -rf $(VENV) build site .pytest_cache .hypothesis

# --- image and simulation ------------------------------------------------------------------
# The image builds with no network inside the build: docker/fetch-wheels.sh downloads, on this
# machine, the wheels the trainer needs on top of BASE_IMAGE.
image:  ## build the trainer image (BASE_IMAGE=..., IMAGE=...)
	bash docker/fetch-wheels.sh $(BASE_IMAGE)
	docker buildx build --load -f docker/Dockerfile --build-arg BASE_IMAGE=$(BASE_IMAGE) -t $(IMAGE) .

compose.yaml: compose/templates/simulation.yaml.j2 compose/templates/service.yaml.j2 launcher/stages/render.py
	$(BIN)/python -m launcher.stages.render

sim: image $(BIN)/.launcher  ## the two-container CPU simulation; results and report.md in runs/local/
	TFC_IMAGE=$(IMAGE) docker compose up --no-build --exit-code-from chief; \
	  code=$$?; docker compose down --remove-orphans >/dev/null 2>&1; \
	  if [ $$code = 0 ] && [ -f runs/local/results.json ]; then $(TFC) report runs/local; fi; exit $$code

sim-down:  ## stop and remove the simulation's containers and network
	docker compose down --remove-orphans

# --- the cluster (HOSTS=inventory.yaml) ------------------------------------------------------
validate: $(BIN)/.launcher  ## check the inventory, contact nothing
	$(TFC) validate -i $(HOSTS)

render: $(BIN)/.launcher  ## write build/<cluster>/<host>/ exactly as `up` pushes it
	$(TFC) render -i $(HOSTS) -o build

preflight: $(BIN)/.launcher  ## check every host (SSH, Docker, GPUs, ports, disk, data, clock)
	$(TFC) preflight -i $(HOSTS)

cluster-up: $(BIN)/.launcher  ## start training on every host, wait for the chief, collect into runs/
	$(TFC) up -i $(HOSTS) --wait

status: $(BIN)/.launcher  ## each host's container state, exit code, last progress line
	$(TFC) status -i $(HOSTS)

collect: $(BIN)/.launcher  ## results and every host's log into runs/<cluster>/<run>/
	$(TFC) collect -i $(HOSTS)

cluster-down: $(BIN)/.launcher  ## stop and remove the cluster's containers on every host
	$(TFC) down -i $(HOSTS)

logs:  ## follow the chief: the cluster's when HOSTS is given or inventory.yaml exists, else the simulation's
	@if [ "$(origin HOSTS)" = "command line" ] || [ "$(origin HOSTS)" = "environment" ] || [ -f "$(HOSTS)" ]; then \
	  $(MAKE) -s $(BIN)/.launcher && $(TFC) logs -i $(HOSTS); else docker compose logs -f chief; fi

# Every bench that writes a section of docs/benchmarks.md, with its default repetitions. Not here:
# bench/lanlab.py (the LAN lab as a command), bench/common.py (shared), bench/relay_survey.py (against
# an old checkout: its command is in its docstring). The labs need root (namespaces, engines, chroots).
BENCHES ?= sync_vs_parallel scaling input_pipeline fanout startup delta relay scaling_lab lockstep upload \
	jump leases allreduce_lab search bootstrap telemetry replay handover cli_start
bench: venv  ## run every bench (as root; hours) and rewrite docs/benchmarks.md; BENCHES="jump leases" for some
	@[ "$$(id -u)" = 0 ] || { echo "make bench: the labs need root (network namespaces, Docker engines, chroots): sudo make bench"; exit 2; }
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	@for b in $(BENCHES); do [ -f bench/$$b.py ] || { echo "make bench: no bench/$$b.py"; exit 2; }; done
	@for b in $(BENCHES); do echo "== bench/$$b.py ($$(date +%T))"; \
	  BASE_IMAGE=$(BASE_IMAGE) $(BIN)/python bench/$$b.py || { echo "make bench: bench/$$b.py failed"; exit 1; }; done
