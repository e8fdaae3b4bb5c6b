# The README's two commands: `make up` (local stack) and `make test`.
SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test schema benchmark

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

test: $(STAMP)
	$(PYTHON) -m pytest -q tests

schema: $(STAMP)
	$(PYTHON) -m components.schema > config.schema.json

benchmark: $(STAMP)
	$(PYTHON) benchmarks/evaluation.py
