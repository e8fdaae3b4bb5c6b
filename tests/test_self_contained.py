"""A clone is the whole project: no code, script, test, Makefile or workflow reads
anything beside the checkout (the `../shared` folder this project's upstream
copies were once kept in), and the contracts the project carries instead are
structural, have provenance, and are what the tests use."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import contracts
from tests.harness import ROOT, tracked_files

# Ways a file could reach outside the checkout: the sibling folder by name, or a
# path that climbs above the repository root.
OUTSIDE_THE_CLONE = [
    re.compile(r"\.\./shared\b"),
    re.compile(r"\bshared/(contracts|seeds|research|hooks)\b"),
    re.compile(r"ROOT\.parent\b"),
    re.compile(r"\.parents\[\d\]"),
    re.compile(r"\$here/\.\./\.\."),
    re.compile(r"(\.\./){2,}"),
]
# Prose may tell the project's history; code may not act on it.
PROSE = (".md",)


def test_no_code_script_test_makefile_or_workflow_reaches_outside_the_clone():
    checked = [p for p in tracked_files() if p.suffix not in PROSE and p.is_file() and not p.relative_to(ROOT).as_posix().startswith("contracts/")]
    assert len(checked) > 50 and ROOT / "Makefile" in checked and ROOT / ".ci" / "run" in checked
    this_file = Path(__file__).resolve()
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in checked
        if path != this_file
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if any(pattern.search(line) for pattern in OUTSIDE_THE_CLONE)
    ]
    assert found == []


def test_the_scan_recognises_each_way_out():
    for line in (
        'CONTRACTS = ROOT.parent / "shared"',
        "cat ../shared/x",
        'd=$(cd "$here/../.." && pwd)',
        "Path(__file__).parents[2]",
        "see shared/seeds/002",
    ):
        assert any(p.search(line) for p in OUTSIDE_THE_CLONE), line
    assert not any(p.search('CONTRACTS = ROOT / "contracts"') for p in OUTSIDE_THE_CLONE)


def test_the_carried_contracts_are_structural_with_provenance_and_a_current_table():
    assert contracts.check() == []
    folders = {entry["folder"] for entry in contracts.read_provenance()}
    assert {"soperator/1.14.10", "soperator/4.1.7", "slinky/v1.2.1", "kueue/v0.19.2", "ack"} <= folders
    for entry in contracts.read_provenance():
        assert all(entry[field] for field in contracts.PROVENANCE_FIELDS), entry


def test_import_keeps_structure_and_fields_named_description_and_drops_description_text(tmp_path):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "annotations": {"controller-gen.kubebuilder.io/version": "v0.1"}},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "description": "A widget.",
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "description": "What it is.",
                                    "required": ["size"],
                                    "x-kubernetes-validations": [{"rule": "self.size > 0", "message": "size must be positive"}],
                                    "properties": {
                                        "description": {"type": "string", "description": "A field named description."},
                                        "size": {"type": "integer", "enum": [1, 2], "description": "How big."},
                                        "parts": {"type": "array", "items": {"type": "string", "description": "One part."}},
                                        "labels": {"type": "object", "additionalProperties": {"type": "string", "description": "x"}},
                                        "either": {
                                            "anyOf": [{"type": "integer", "description": "n"}, {"type": "string"}],
                                            "x-kubernetes-int-or-string": True,
                                        },
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    (upstream / "example.com_widgets.yaml").write_text(json.dumps(crd))
    root = tmp_path / "contracts"
    root.mkdir()
    (root / "README.md").write_text(f"# x\n\n{contracts.TABLE_START}\n{contracts.TABLE_END}\n")
    provenance = {field: f"the {field}" for field in contracts.PROVENANCE_FIELDS}
    (written,) = contracts.import_contracts("example/v1", [upstream], provenance, root=root)

    assert written == root / "example" / "v1" / "example.com_widgets.json"
    stored = json.loads(written.read_text())
    spec = stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec == {
        "type": "object",
        "required": ["size"],
        "x-kubernetes-validations": [{"rule": "self.size > 0", "message": "size must be positive"}],
        "properties": {
            "description": {"type": "string"},
            "size": {"type": "integer", "enum": [1, 2]},
            "parts": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
        },
    }
    assert stored["metadata"] == {"name": "widgets.example.com"}
    assert contracts.check(root) == []
    assert "| `example/v1/` | the repository | `the path` | the ref | `the commit` | the date | the what |" in (root / "README.md").read_text()

    # A stale table and a folder without provenance are both reported.
    (root / "README.md").write_text(f"# x\n\n{contracts.TABLE_START}\n{contracts.TABLE_END}\n")
    (root / "other").mkdir()
    shutil.copy(written, root / "other" / "copy.json")
    problems = contracts.check(root)
    assert any("provenance table is not what" in p for p in problems), problems
    assert any("other/copy.json: folder other has no entry" in p for p in problems), problems


def test_import_refuses_a_file_that_is_no_contract(tmp_path):
    bad = tmp_path / "values.yaml"
    bad.write_text("replicas: 3\n")
    with pytest.raises(contracts.ContractError, match="neither a CustomResourceDefinition nor a JSON Schema"):
        contracts.import_contracts("x/v1", [bad], {}, root=tmp_path)
    with pytest.raises(contracts.ContractError, match="must be a folder under contracts/"):
        contracts.import_contracts("../escape", [bad], {}, root=tmp_path)


def test_chart_values_keep_the_key_tree_with_defaults_and_what_the_templates_read(tmp_path):
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(
        "name: widget\nversion: v1.0.0\ndependencies:\n- {name: nfd, version: 0.1.0, repository: oci://x, condition: nfd.enabled}\n"
    )
    (chart / "values.yaml").write_text("# a comment\ncdi:\n  enabled: true\ntoolkit:\n  env: []\n  resources: {}\n  version: v1.20.0\n")
    (chart / "templates" / "policy.yaml").write_text("{{ if .Values.cdi.enabled }}{{ toYaml .Values.toolkit.env }}{{ .Values.extra.key }}{{ end }}")
    root = tmp_path / "contracts"
    root.mkdir()
    (root / "README.md").write_text(f"# x\n\n{contracts.TABLE_START}\n{contracts.TABLE_END}\n")
    provenance = {field: f"the {field}" for field in contracts.PROVENANCE_FIELDS}
    (written,) = contracts.import_chart_values("charts/widget/v1.0.0", chart, provenance, root=root)
    stored = json.loads(written.read_text())
    assert stored["values"] == {
        "cdi": {"enabled": {"$type": "boolean", "$default": True}},
        "toolkit": {
            "env": {"$type": "array", "$default": []},
            "resources": {"$type": "object", "$default": {}},
            "version": {"$type": "string", "$default": "v1.20.0"},
        },
    }
    assert stored["templateReads"] == ["cdi.enabled", "extra.key", "toolkit.env"]
    assert stored["dependencies"] == [{"name": "nfd", "version": "0.1.0", "repository": "oci://x", "condition": "nfd.enabled"}]
    assert contracts.check(root) == []
    with pytest.raises(contracts.ContractError, match="must be a folder under contracts/"):
        contracts.import_chart_values("../escape", chart, provenance, root=root)


def test_the_contract_tests_pass_in_a_clone_with_nothing_beside_it(tmp_path):
    """The tracked files alone, in an empty directory: the contract tier and the
    contracts check run there against what the clone carries."""
    clone = tmp_path / "empty" / "clone"
    for path in tracked_files():
        if path.is_file():
            target = clone / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    assert not (clone.parent / "shared").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    check = subprocess.run([sys.executable, "-m", "scripts.contracts", "check"], cwd=clone, capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stderr
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_contracts.py",
            "-k",
            "prod-hanoi or staging-hanoi or prod-hcm or staging-hangzhou",
        ],
        cwd=clone,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and " failed" not in result.stdout and "skipped" not in result.stdout
