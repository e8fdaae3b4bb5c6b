# The README's two commands: `make up` (the local stack) and `make test`.
SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
STACK ?= dev

# The local stack only: file state in the checkout, a documented throwaway passphrase.
# metadata=skip: gocloud's fileblob keeps a `.attrs` sidecar beside each state file and rewrites
# it in place (truncate, then write) on every checkpoint save, so the program's read of its own
# outputs (the StackReference in components/platform.py) could find it empty mid-up and fail
# with "failed to load checkpoint: EOF" (issue 21). The state file itself is replaced atomically.
LOCAL_ENV := PULUMI_BACKEND_URL='file://$(CURDIR)/.pulumi-state?metadata=skip' \
	PULUMI_CONFIG_PASSPHRASE=local-throwaway-passphrase \
	PULUMI_SKIP_UPDATE_CHECK=true

# The Pulumi toolchain: scripts/install-pulumi.sh builds it from Go modules once
# (a normally installed Pulumi is used as is) and prints an env file setting
# PATH and PULUMI_HOME. Its language host runs the program on .venv, as Pulumi.yaml says, and
# reads PULUMI_PYTHON_CMD as a name inside .venv/bin: one left in the shell by the old
# instructions (an absolute path) would break it, hence the unset.
# GOGC: the CLI spends most of a large up re-encoding its whole checkpoint after every step,
# and Go's collector took a quarter of that CPU; 400 (collect at 5x the live heap, not 2x) cut the
# CPU per resource by 22% at 330 resources (benchmarks/kube.py, issue 21). The workflows set the same.
GOGC ?= 400
PULUMI_ENV = . "$$(scripts/install-pulumi.sh)" && unset PULUMI_PYTHON_CMD && export GOGC=$(GOGC)

# The policy pack runs in its own virtualenv (policies/PulumiPolicy.yaml: virtualenv: venv),
# from its own requirements, exactly as `pulumi policy publish` ships it.
POLICY_VENV := policies/venv
POLICY_STAMP := $(POLICY_VENV)/.installed

# actionlint, built from its Go module into a cache outside the checkout.
ACTIONLINT_VERSION := v1.7.12
ACTIONLINT := $(HOME)/.cache/slurm-platform/tools/actionlint-$(ACTIONLINT_VERSION)/actionlint

.PHONY: venv policy-venv toolchain test test-fast test-services lint up preview preflight report recover schema docs benchmark

venv: $(STAMP)

# Runtime, policy pack and test/lint dependencies (`pulumi up` itself installs requirements.txt only).
$(STAMP): requirements.txt requirements-dev.txt policies/requirements.txt
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

policy-venv: $(POLICY_STAMP)

$(POLICY_STAMP): policies/requirements.txt
	test -x $(POLICY_VENV)/bin/python || python3 -m venv $(POLICY_VENV)
	$(POLICY_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r policies/requirements.txt
	touch $(POLICY_STAMP)

$(ACTIONLINT):
	GOBIN=$(dir $(ACTIONLINT)) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

# ruff (lint + format check), mypy and import-linter, configured in pyproject.toml; bash -n and shellcheck for
# the shell scripts (the renderers read those of components/); actionlint for the workflows.
lint: $(STAMP) $(ACTIONLINT)
	$(VENV)/bin/ruff check components policies tests benchmarks tools __main__.py
	$(VENV)/bin/ruff format --check components policies tests benchmarks tools __main__.py
	$(VENV)/bin/mypy
	PYTHONPATH=policies $(VENV)/bin/lint-imports --no-cache
	for script in $$(git ls-files 'components/*.sh'); do bash -n "$$script" || exit 1; done
	$(VENV)/bin/shellcheck --shell=bash $$(git ls-files 'components/*.sh')
	$(ACTIONLINT) -no-color

toolchain:
	@scripts/install-pulumi.sh >/dev/null

# Everything, the engine tests included: they fail (never skip) without a toolchain.
test: $(STAMP) $(POLICY_STAMP) toolchain
	scripts/services-local.sh install
	$(PULUMI_ENV) && $(PYTHON) -m pytest -q -rs tests

# The unit tier alone (no toolchain, cluster or daemon): about 2.5 minutes on 2 cores.
test-fast: $(STAMP) $(POLICY_STAMP)
	$(PYTHON) -m pytest -q -m unit tests

# The services tier alone: real Slurm, munge, MariaDB and OpenLDAP daemons from Debian packages
# (scripts/services-local.sh installs them; root on Debian 12). The munge tests take their key
# from an engine `up` of the local stack, hence the toolchain.
test-services: $(STAMP) $(POLICY_STAMP) toolchain
	scripts/services-local.sh install
	$(PYTHON) -m pytest -q -rs -m services tests

# Resource operations Pulumi runs at once. The CLI's default (4 x cores) is 8 on CI's 2 cores: far below
# what the API server takes, and the last claim waited 60 s for a slot (issue 21). 64 measured fastest on kwok.
PARALLEL ?= 64

# `make up` is the local stack; `make up STACK=kwok` deploys to a loopback
# Kubernetes API server (scripts/kube-local.sh) with kwok's fake nodes.
ifeq ($(STACK),kwok)
up: $(STAMP) toolchain
	mkdir -p .pulumi-state
	scripts/kube-local.sh charts .kwok/charts
	kubeconfig=$$(scripts/kube-local.sh ensure) && kubectl=$$(scripts/kube-local.sh bin)/kubectl && \
	$(PYTHON) -m scripts.kwok_nodes Pulumi.kwok.yaml | $$kubectl --kubeconfig "$$kubeconfig" apply --server-side -f - && \
	$(PULUMI_ENV) && export $(LOCAL_ENV) KUBECONFIG="$$kubeconfig" && \
	pulumi stack select kwok --create --secrets-provider passphrase --non-interactive && \
	pulumi up --stack kwok --yes --non-interactive --parallel $(PARALLEL)
	@echo "kubeconfig: $$(scripts/kube-local.sh kubeconfig); stop the control plane with scripts/kube-local.sh stop"
else
up: $(STAMP) toolchain
	mkdir -p .pulumi-state
	$(PULUMI_ENV) && export $(LOCAL_ENV) && \
	pulumi stack select local --create --secrets-provider passphrase --non-interactive && \
	pulumi up --stack local --yes --non-interactive --parallel $(PARALLEL)
	@echo "manifests: rendered/0-crd (CRDs) and rendered/1-manifest (everything else)"
endif

# The diff CI posts on a pull request, with the policy pack and the stack's policy config.
preview: $(STAMP) $(POLICY_STAMP) toolchain
	$(PULUMI_ENV) $(if $(filter local kwok,$(STACK)),&& export $(LOCAL_ENV)) \
	$(if $(filter kwok,$(STACK)),&& export KUBECONFIG="$$(scripts/kube-local.sh kubeconfig)") && \
	pulumi preview --diff --stack $(STACK) --non-interactive --parallel $(PARALLEL) \
		--policy-pack policies --policy-pack-config policies/config/$(STACK).json

# After a CLI killed outright in the middle of an update (tools/recover.py): the stack's lock removed, each
# pending create imported when the cluster has it, cleared when not. The kwok stack's cluster is kube-local.sh's.
recover: $(STAMP) toolchain
	$(PULUMI_ENV) $(if $(filter local kwok,$(STACK)),&& export $(LOCAL_ENV)) \
	$(if $(filter kwok,$(STACK)),&& export KUBECONFIG="$$(scripts/kube-local.sh kubeconfig)" KUBECTL="$$(scripts/kube-local.sh bin)/kubectl") && \
	$(PYTHON) -m tools.recover --stack $(STACK)

# What the live cluster of the stack's kubeconfig context lacks, before `up` (tools/preflight.py): reads only;
# exits 1 naming each failing check and its fix; IGNORE="<check> ..." reports those checks' failures as accepted.
# The kwok stack's control plane is scripts/kube-local.sh's.
preflight: $(STAMP)
	$(if $(filter kwok,$(STACK)),KUBECONFIG="$$(scripts/kube-local.sh kubeconfig)") $(PYTHON) -m tools.preflight --stack $(STACK) \
		$(foreach check,$(IGNORE),--ignore $(check))

# Each tenant's GPU-hours used against guaranteed from FROM to TO (UTC dates or times; default the last 7 days), per
# scheduler, from sacct (kubectl exec in a Slurm pod) and Kueue's Workloads (tools/report.py): reads only. JSON=1 for JSON;
# SACCT_FILE=<file> reads a saved sacct output (the report CronJob's log) instead of the cluster.
report: $(STAMP)
	$(if $(filter kwok,$(STACK)),KUBECONFIG="$$(scripts/kube-local.sh kubeconfig)") $(PYTHON) -m tools.report --stack $(STACK) \
		$(if $(FROM),--from $(FROM)) $(if $(TO),--to $(TO)) $(if $(JSON),--json) $(if $(SACCT_FILE),--sacct-file $(SACCT_FILE))

# Writes config.schema.json, stack.schema.json and policies/config/<stack>.json; a failure leaves each as it was.
schema: $(STAMP)
	$(PYTHON) -m tools.schema

# Rewrites the configuration reference in docs/configuration.md from the config models (tools/docs.py).
docs: $(STAMP)
	$(PYTHON) -m tools.docs

benchmark: $(STAMP) $(POLICY_STAMP) toolchain
	$(PYTHON) benchmarks/architecture.py
	$(PYTHON) benchmarks/evaluation.py
	$(PYTHON) benchmarks/tenant_cells.py
	$(PYTHON) benchmarks/monitoring_rules.py
	$(PULUMI_ENV) && $(PYTHON) benchmarks/engine.py
	$(PULUMI_ENV) && $(PYTHON) benchmarks/kube.py --parallel $(PARALLEL) --skip-checkpoints
	$(PULUMI_ENV) && $(PYTHON) benchmarks/state.py
	$(PULUMI_ENV) && $(PYTHON) benchmarks/scale.py --parallel $(PARALLEL)
	$(PULUMI_ENV) && $(PYTHON) benchmarks/split.py --parallel $(PARALLEL)
	$(PYTHON) benchmarks/preflight.py
	scripts/services-local.sh install
	$(PYTHON) benchmarks/tenants_job.py
	$(PYTHON) benchmarks/kueue_admission.py
