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

# A normally installed Pulumi (CLI + language hosts on PATH) is used as is;
# otherwise scripts/install-pulumi.sh builds what the registries serve.
PULUMI_PATH = $$(command -v pulumi-language-python >/dev/null && dirname "$$(command -v pulumi)" || scripts/install-pulumi.sh)

# The policy pack runs in its own virtualenv (policies/PulumiPolicy.yaml: virtualenv: venv),
# from its own requirements, exactly as `pulumi policy publish` ships it.
POLICY_VENV := policies/venv
POLICY_STAMP := $(POLICY_VENV)/.installed

# actionlint, built from its Go module into a cache outside the checkout.
ACTIONLINT_VERSION := v1.7.12
ACTIONLINT := $(HOME)/.cache/slurm-platform/tools/actionlint-$(ACTIONLINT_VERSION)/actionlint

.PHONY: venv policy-venv test lint up preview schema benchmark

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

# ruff (lint + format check) and mypy, configured in pyproject.toml; actionlint for the workflows.
lint: $(STAMP) $(ACTIONLINT)
	$(VENV)/bin/ruff check components policies tests benchmarks __main__.py
	$(VENV)/bin/ruff format --check components policies tests benchmarks __main__.py
	$(VENV)/bin/mypy
	$(ACTIONLINT) -no-color

test: $(STAMP) $(POLICY_STAMP)
	$(PYTHON) -m pytest -q -rs tests

up: $(STAMP)
	mkdir -p .pulumi-state
	bin="$(PULUMI_PATH)" && export PATH="$$bin:$$PATH" $(LOCAL_ENV) && \
	pulumi stack select local --create --secrets-provider passphrase --non-interactive && \
	pulumi up --stack local --yes --non-interactive
	@echo "manifests: rendered/0-crd (CRDs) and rendered/1-manifest (everything else)"

# The diff CI posts on a pull request, with the policy pack and the stack's policy config.
preview: $(STAMP) $(POLICY_STAMP)
	bin="$(PULUMI_PATH)" && export PATH="$$bin:$$PATH" PULUMI_SKIP_UPDATE_CHECK=true && \
	pulumi preview --diff --stack $(STACK) --policy-pack policies --policy-pack-config policies/config/$(STACK).json

# Writes config.schema.json and stack.schema.json; a failure leaves both as they were.
schema: $(STAMP)
	$(PYTHON) -m components.schema

benchmark: $(STAMP)
	$(PYTHON) benchmarks/evaluation.py
