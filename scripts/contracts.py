"""The upstream API contracts this project carries in contracts/: import and check.

    python -m scripts.contracts import --into soperator/4.1.7 \\
        --repository github.com/nebius/soperator --path config/crd/bases \\
        --ref 4.1.7 --commit 6f7fd3a9f9ab... --date 2026-07-30 \\
        --what "SlurmCluster v1 + NodeSet v1alpha1" UPSTREAM_FILE_OR_DIR...
    python -m scripts.contracts chart-values --into charts/gpu-operator/v26.7.0 \\
        --repository github.com/NVIDIA/gpu-operator --path deployments/gpu-operator \\
        --ref v26.7.0 --commit 10ee5b3638b8... --date 2026-08-20 --what "..." UPSTREAM_CHART_DIR
    python -m scripts.contracts check

`import` replaces contracts/<into>/ with the structural part of each upstream
file (CRD YAML or JSON Schema): kinds, versions, field names, types, enums,
required lists, `x-kubernetes-*` markers and validation rules, without the
description text. It records where they came from in contracts/provenance.json
and rewrites the table in contracts/README.md, so moving to a new upstream
release is one command and a reviewable diff. `chart-values` does the same for
a Helm chart's values: contracts/<into>/values.json holds its values.yaml key
tree with defaults, the .Values paths its templates read and its
dependencies' conditions. `check` fails when a stored file
still carries description text, a folder has no provenance, or the README
table is not the one provenance.json gives.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

CONTRACTS = Path(__file__).resolve().parent.parent / "contracts"
PROVENANCE = "provenance.json"
README = "README.md"
TABLE_START = "<!-- provenance table: written by `python -m scripts.contracts import` -->"
TABLE_END = "<!-- end of provenance table -->"
PROVENANCE_FIELDS = ("repository", "path", "ref", "commit", "date", "what")

# JSON Schema keywords whose value is a map of name -> schema (the names are field names, kept).
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords whose value is one schema, or a list of schemas.
SCHEMA_VALUES = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else", "additionalItems")
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")


class ContractError(Exception):
    pass


def structural(schema: Any) -> Any:
    """A schema without its `description` keywords; a field that happens to be named
    `description` stays (it is a key of `properties`, not a keyword)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for keyword, value in schema.items():
        if keyword == "description":
            continue
        if keyword in SCHEMA_MAPS and isinstance(value, dict):
            out[keyword] = {name: structural(sub) for name, sub in value.items()}
        elif keyword in SCHEMA_VALUES:
            out[keyword] = [structural(s) for s in value] if isinstance(value, list) else structural(value)
        elif keyword in SCHEMA_LISTS and isinstance(value, list):
            out[keyword] = [structural(s) for s in value]
        else:
            out[keyword] = value
    return out


def structural_crd(crd: dict[str, Any]) -> dict[str, Any]:
    """A CustomResourceDefinition an API server accepts, its schemas structural only."""
    versions = [
        {**version, "schema": {"openAPIV3Schema": structural(version["schema"]["openAPIV3Schema"])}} if "schema" in version else version
        for version in crd["spec"]["versions"]
    ]
    return {
        "apiVersion": crd["apiVersion"],
        "kind": crd["kind"],
        "metadata": {"name": crd["metadata"]["name"]},
        "spec": {**crd["spec"], "versions": versions},
    }


def structural_document(document: Any, source: Path) -> dict[str, Any]:
    if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
        return structural_crd(document)
    if isinstance(document, dict) and "$schema" in document:
        return structural(document)
    raise ContractError(f"{source}: neither a CustomResourceDefinition nor a JSON Schema (no $schema)")


def upstream_files(sources: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for source in sources:
        if source.is_dir():
            files += sorted(p for p in source.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        elif source.is_file():
            files.append(source)
        else:
            raise ContractError(f"{source}: no such file or directory")
    if not files:
        raise ContractError("no upstream CRD or JSON Schema files given")
    return files


def dump(document: dict[str, Any]) -> str:
    # One key per line, so a new upstream release reads as a diff.
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def contract_folder(into: str, root: Path = CONTRACTS) -> Path:
    if Path(into).is_absolute() or ".." in Path(into).parts:
        raise ContractError(f"--into {into!r}: must be a folder under contracts/, e.g. soperator/4.1.7")
    return root / into


def import_contracts(into: str, sources: Iterable[Path], provenance: dict[str, str], root: Path = CONTRACTS) -> list[Path]:
    """Replace root/<into>/ with the structural copies of `sources`; record provenance."""
    contract_folder(into, root)
    written: dict[Path, str] = {}
    for source in upstream_files(sources):
        documents = [d for d in yaml.safe_load_all(source.read_text()) if d is not None]
        if len(documents) != 1:
            raise ContractError(f"{source}: expected one document, found {len(documents)}")
        written[Path(source.stem + ".json")] = dump(structural_document(documents[0], source))
    return write_contract(into, written, provenance, root)


def write_contract(into: str, written: dict[Path, str], provenance: dict[str, str], root: Path = CONTRACTS) -> list[Path]:
    """Replace root/<into>/ with `written` (file name -> text); record provenance and rewrite the README table."""
    folder = contract_folder(into, root)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, text in written.items():
        (folder / name).write_text(text)
    entries = {e["folder"]: e for e in read_provenance(root)}
    entries[into] = {"folder": into, **{f: provenance.get(f, "") for f in PROVENANCE_FIELDS}}
    (root / PROVENANCE).write_text(json.dumps([entries[k] for k in sorted(entries)], indent=1) + "\n")
    write_readme_table(root)
    return [folder / name for name in written]


JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"))


def values_tree(values: Any) -> Any:
    """A chart's values.yaml as its key tree: each leaf (a scalar, a list or an empty map) as {$type, $default}."""
    if isinstance(values, dict) and values:
        return {key: values_tree(value) for key, value in values.items()}
    kind = next((name for python_type, name in JSON_TYPES if isinstance(values, python_type)), "null")
    return {"$type": kind, "$default": values}


def template_reads(chart: Path) -> list[str]:
    """The .Values paths the chart's own templates read (not its subcharts')."""
    texts = [path.read_text() for path in sorted((chart / "templates").rglob("*")) if path.is_file()]
    return sorted({match for text in texts for match in re.findall(r"\.Values\.([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)", text)})


def chart_values_contract(chart: Path, source: dict[str, str]) -> dict[str, Any]:
    """What the project relies on of a chart's values: its key tree with defaults, the paths its templates read,
    and its dependencies' conditions. Data only: no template code, no comments."""
    chart_yaml = yaml.safe_load((chart / "Chart.yaml").read_text())
    return {
        "chart": chart_yaml["name"],
        "source": source,
        "dependencies": [
            {key: d[key] for key in ("name", "version", "repository", "condition") if key in d} for d in chart_yaml.get("dependencies") or []
        ],
        "leafEncoding": {"type": "$type", "default": "$default"},
        "values": values_tree(yaml.safe_load((chart / "values.yaml").read_text()) or {}),
        "templateReads": template_reads(chart),
    }


def import_chart_values(into: str, chart: Path, provenance: dict[str, str], root: Path = CONTRACTS) -> list[Path]:
    """Replace root/<into>/ with values.json, the values contract of the chart directory `chart`."""
    contract_folder(into, root)
    document = chart_values_contract(chart, {"repository": provenance["repository"], "path": provenance["path"], "ref": provenance["ref"]})
    return write_contract(into, {Path("values.json"): dump(document)}, provenance, root)


def read_provenance(root: Path = CONTRACTS) -> list[dict[str, str]]:
    path = root / PROVENANCE
    return json.loads(path.read_text()) if path.exists() else []


def provenance_table(entries: list[dict[str, str]]) -> str:
    rows = ["| folder | repository | path | ref | commit | date | what |", "|---|---|---|---|---|---|---|"]
    rows += [f"| `{e['folder']}/` | {e['repository']} | `{e['path']}` | {e['ref']} | `{e['commit']}` | {e['date']} | {e['what']} |" for e in entries]
    return "\n".join(rows)


def readme_with_table(text: str, entries: list[dict[str, str]]) -> str:
    before, start, rest = text.partition(TABLE_START)
    _, end, after = rest.partition(TABLE_END)
    if not start or not end:
        raise ContractError(f"contracts/{README} has no provenance table markers ({TABLE_START} ... {TABLE_END})")
    return f"{before}{TABLE_START}\n{provenance_table(entries)}\n{TABLE_END}{after}"


def write_readme_table(root: Path = CONTRACTS) -> None:
    readme = root / README
    readme.write_text(readme_with_table(readme.read_text(), read_provenance(root)))


def descriptions_left(schema: Any, path: str = "") -> list[str]:
    """Where a schema keyword `description` survived (field names called description are fine)."""
    if not isinstance(schema, dict):
        return []
    found = [path or "/"] if isinstance(schema.get("description"), str) else []
    for keyword, value in schema.items():
        if keyword in SCHEMA_MAPS and isinstance(value, dict):
            found += [p for name, sub in value.items() for p in descriptions_left(sub, f"{path}/{keyword}/{name}")]
        elif keyword in SCHEMA_VALUES or keyword in SCHEMA_LISTS:
            subs = value if isinstance(value, list) else [value]
            found += [p for i, sub in enumerate(subs) for p in descriptions_left(sub, f"{path}/{keyword}/{i}")]
    return found


def stored_schemas(document: dict[str, Any]) -> list[Any]:
    if document.get("kind") == "CustomResourceDefinition":
        return [v["schema"]["openAPIV3Schema"] for v in document["spec"]["versions"] if "schema" in v]
    return [document]


def contract_files(root: Path = CONTRACTS) -> list[Path]:
    return sorted(p for p in root.rglob("*.json") if p.name != PROVENANCE)


def check(root: Path = CONTRACTS) -> list[str]:
    """Every problem with the carried contracts, one line each (none: all good)."""
    problems: list[str] = []
    folders = {e["folder"] for e in read_provenance(root)}
    files = contract_files(root)
    if not files:
        problems.append(f"{root}: no contract files")
    for path in files:
        folder = path.parent.relative_to(root).as_posix()
        if folder not in folders:
            problems.append(f"{path.relative_to(root)}: folder {folder} has no entry in {PROVENANCE}")
        for schema in stored_schemas(json.loads(path.read_text())):
            problems += [f"{path.relative_to(root)}: description text at {where}" for where in descriptions_left(schema)]
    problems += [f"{PROVENANCE}: {folder}/ has no contract files" for folder in sorted(folders) if not list((root / folder).glob("*.json"))]
    readme = (root / README).read_text()
    if readme_with_table(readme, read_provenance(root)) != readme:
        problems.append(f"{README}: the provenance table is not what {PROVENANCE} says (run an import, or fix it by hand)")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.contracts", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    importing = commands.add_parser("import", help="replace contracts/<into>/ with structural copies of upstream files")
    importing.add_argument("--into", required=True, help="folder under contracts/, e.g. soperator/4.1.7")
    for field in PROVENANCE_FIELDS:
        importing.add_argument(f"--{field}", required=True)
    importing.add_argument("sources", nargs="+", type=Path, metavar="UPSTREAM_FILE_OR_DIR")
    values = commands.add_parser("chart-values", help="replace contracts/<into>/ with a chart's values contract (values.json)")
    values.add_argument("--into", required=True, help="folder under contracts/, e.g. charts/gpu-operator/v26.7.0")
    for field in PROVENANCE_FIELDS:
        values.add_argument(f"--{field}", required=True)
    values.add_argument("chart", type=Path, metavar="UPSTREAM_CHART_DIR")
    commands.add_parser("check", help="fail on description text, missing provenance or a stale README table")
    args = parser.parse_args(argv)
    try:
        if args.command in ("import", "chart-values"):
            provenance = {field: getattr(args, field) for field in PROVENANCE_FIELDS}
            if args.command == "import":
                written = import_contracts(args.into, args.sources, provenance)
            else:
                written = import_chart_values(args.into, args.chart, provenance)
            for path in written:
                print(path.relative_to(CONTRACTS.parent))
            return 0
        problems = check()
    except (ContractError, OSError, yaml.YAMLError, json.JSONDecodeError) as error:
        print(f"contracts: {error}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"contracts: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
