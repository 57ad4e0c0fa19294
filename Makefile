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

.PHONY: venv cluster-build cluster-up cluster-down cluster-status site test unit integration bench bench-scale test-versions sanity-versions smoke-versions test-k8s-1.34

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

# The unit tests on the oldest (ansible-core 2.18, kubernetes 30.1.0, Python 3.11) and the newest
# (ansible-core 2.21, the newest kubernetes, Python 3.12) releases the collection supports, each in its
# own venv, then sanity-versions and smoke-versions: see README, Supported versions. Not part of `make test`.
PYTHON_OLDEST ?= $(PYTHON)
# The first Python 3.12 or later that runs: on PATH, else pyenv's.
PYTHON_NEWEST ?= $(shell for p in python3.12 python3.13 $(HOME)/.pyenv/versions/3.1[23]*/bin/python; do \
  "$$p" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && { command -v "$$p"; break; }; done)

.venv-%/.installed: tests/versions/%.txt tests/versions/common.txt
	@test -n "$(PYTHON_$(shell echo $* | tr a-z A-Z))" || { echo "no Python for $*: set PYTHON_$(shell echo $* | tr a-z A-Z)"; exit 2; }
	$(PYTHON_$(shell echo $* | tr a-z A-Z)) -m venv .venv-$*
	.venv-$*/bin/pip install --quiet --upgrade pip
	cd tests/versions && ../../.venv-$*/bin/pip install --quiet -r $*.txt
	touch $@

VERSION_VENVS = oldest newest
define link-version-venvs
for v in $(VERSION_VENVS); do \
  site=$$(.venv-$$v/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
  mkdir -p "$$site/ansible_collections/kubegpu" && ln -sfn "$(CURDIR)" "$$site/ansible_collections/kubegpu/scheduling"; \
done
endef

test-versions: .venv-oldest/.installed .venv-newest/.installed
	@$(link-version-venvs)
	@set -e; for v in $(VERSION_VENVS); do \
	  .venv-$$v/bin/python -c 'import ansible.release, kubernetes, sys; print("===", sys.argv[1] + ": ansible-core", ansible.release.__version__, "kubernetes", kubernetes.__version__, "Python", sys.version.split()[0])' $$v; \
	  .venv-$$v/bin/python -m pytest -q -p no:cacheprovider tests/unit; \
	done
	@$(MAKE) --no-print-directory sanity-versions smoke-versions

# ansible-test sanity with each of those venvs' ansible-test and Python (tests/sanity/run.py). Part of `make test-versions`.
sanity-versions: .venv-oldest/.installed .venv-newest/.installed
	@set -e; for v in $(VERSION_VENVS); do \
	  echo "=== $$v: ansible-test sanity"; \
	  .venv-$$v/bin/python tests/sanity/run.py; \
	done

# Every runbook under playbooks/ with each of those venvs' ansible-playbook against the local cluster (started
# if it is not running, as `make site` does; left running): tests/versions/smoke.py. Part of `make test-versions`.
smoke-versions: venv .venv-oldest/.installed .venv-newest/.installed
	@$(link-version-venvs)
	@set -e; kubeconfig=$$($(CLUSTER) up --timeout $(TIMEOUT) | tail -1); for v in $(VERSION_VENVS); do \
	  echo "=== $$v: every runbook against the local cluster"; \
	  .venv-$$v/bin/python tests/versions/smoke.py "$$kubeconfig"; \
	done

# The integration tests marked every_release (pytest.ini) against a second control plane at Kubernetes
# 1.34, built on first use into its own cache folder (tests/cluster/versions.py) and started in its own
# state folder on its own ports, then stopped; the fleet report's second cluster runs the newest release
# beside it (built too): see README, Supported versions. Not part of `make test`.
K8S_1_34_DIR ?= $(or $(KUBEGPU_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kubegpu)/cluster-k8s-v1.34
K8S_1_34_ETCD_PORT ?= 34379
K8S_1_34_APISERVER_PORT ?= 38443
K8S_1_34_KWOK_PORT ?= 32250
K8S_1_34_ENV = KUBEGPU_KUBERNETES=1.34 KUBEGPU_CLUSTER_DIR=$(K8S_1_34_DIR) KUBEGPU_ETCD_PORT=$(K8S_1_34_ETCD_PORT) \
  KUBEGPU_APISERVER_PORT=$(K8S_1_34_APISERVER_PORT) KUBEGPU_KWOK_PORT=$(K8S_1_34_KWOK_PORT)

test-k8s-1.34: venv
	@$(CLUSTER) build >/dev/null
	@$(K8S_1_34_ENV) $(CLUSTER) build >/dev/null
	@$(K8S_1_34_ENV) $(CLUSTER) up --timeout $(TIMEOUT) >/dev/null
	@status=0; $(K8S_1_34_ENV) $(PY) -m pytest -m every_release tests/integration || status=$$?; \
	  $(K8S_1_34_ENV) $(CLUSTER) down; exit $$status
