# The README's two commands: `make up` (the local stack) and `make test`.
SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
STACK ?= dev

# The local stack only: file state in the checkout, a documented throwaway passphrase.
LOCAL_ENV := PULUMI_BACKEND_URL=file://$(CURDIR)/.pulumi-state \
	PULUMI_CONFIG_PASSPHRASE=local-throwaway-passphrase \
	PULUMI_SKIP_UPDATE_CHECK=true

# The Pulumi toolchain: scripts/install-pulumi.sh builds it from Go modules once
# (a normally installed Pulumi is used as is) and prints an env file setting
# PATH and PULUMI_HOME. The Python language host it builds finds the project's
# interpreter through PULUMI_PYTHON_CMD.
PULUMI_ENV = . "$$(scripts/install-pulumi.sh)" && export PULUMI_PYTHON_CMD="$(CURDIR)/$(PYTHON)"

.PHONY: venv toolchain test up preview schema benchmark

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

toolchain:
	@scripts/install-pulumi.sh >/dev/null

# Everything, the engine tests included: they fail (never skip) without a toolchain.
test: $(STAMP) toolchain
	$(PULUMI_ENV) && $(PYTHON) -m pytest -q -rs tests

up: $(STAMP) toolchain
	mkdir -p .pulumi-state
	$(PULUMI_ENV) && export $(LOCAL_ENV) && \
	pulumi stack select local --create --secrets-provider passphrase --non-interactive && \
	pulumi up --stack local --yes --non-interactive
	@echo "manifests: rendered/0-crd (CRDs) and rendered/1-manifest (everything else)"

# The diff CI posts on a pull request, with the policy pack and the stack's policy config.
preview: $(STAMP) toolchain
	$(PULUMI_ENV) $(if $(filter local,$(STACK)),&& export $(LOCAL_ENV)) && \
	pulumi preview --diff --stack $(STACK) --non-interactive \
		--policy-pack policies --policy-pack-config policies/config/$(STACK).json

schema: $(STAMP)
	$(PYTHON) -m components.schema > config.schema.json

benchmark: $(STAMP) toolchain
	$(PYTHON) benchmarks/evaluation.py
	$(PULUMI_ENV) && $(PYTHON) benchmarks/engine.py
