# Entry points: `make site` runs the main job, `make test` runs the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLUSTER := $(PY) -m tests.cluster
# Seconds `make cluster-up` and `make site` wait for each step of the local cluster's start.
TIMEOUT ?= 180
# Arguments for ansible-playbook in `make site`.
ARGS ?=
# The venv's site-packages, where this checkout is linked as ansible_collections/kubegpu/scheduling.
COLLECTIONS = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

.PHONY: venv cluster-build cluster-up cluster-down cluster-status site test unit integration bench bench-scale

$(VENV)/.installed: requirements.txt test-requirements.txt
	@echo "creating $(VENV) and installing test-requirements.txt into it (needs the network; a minute or two)"
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r test-requirements.txt
	touch $@

# Python imports this checkout as ansible_collections.kubegpu.scheduling from the venv, and ansible
# finds it there. Linked on every run, so that the link follows the checkout.
venv: $(VENV)/.installed
	@mkdir -p "$(COLLECTIONS)/ansible_collections/kubegpu"
	@ln -sfn "$(CURDIR)" "$(COLLECTIONS)/ansible_collections/kubegpu/scheduling"

cluster-build: venv
	$(CLUSTER) build

cluster-up: venv
	@$(CLUSTER) up --timeout $(TIMEOUT)

cluster-down: venv
	@$(CLUSTER) down

cluster-status: venv
	@$(CLUSTER) status

# The main job: the site playbook against the local simulated GPU cluster (built and started on first use), or,
# with KUBECONFIG set, against that cluster after saying which one it is and what the run writes there (asked
# first on a terminal). ARGS go to ansible-playbook: make site ARGS="--check --diff -e kubegpu_strict=true".
site: venv
	@$(PY) -m tests.cluster.site --timeout $(TIMEOUT) -- $(ARGS)

test: venv
	$(PY) -m pytest

unit: venv
	$(PY) -m pytest tests/unit

integration: venv
	$(PY) -m pytest tests/integration

# Benchmarks at scale (about 45 minutes; not part of the tests): see docs/benchmarks.md.
bench: venv
	$(PY) -m bench.run

# The fleet facts at 1,000, 2,500 and 5,000 nodes (100,000 pods at the top; about an hour and 8 GB;
# not part of the tests or of `make bench`): see docs/benchmarks.md.
bench-scale: venv
	$(PY) -m bench.scale
