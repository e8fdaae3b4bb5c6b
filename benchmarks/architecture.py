"""The shape of the code, as figures anyone can reproduce (issue 41): calls of `operator_module` in components/
(the operator is resolved once), functions outside components/config/ that take the whole PlatformConfig, and the
largest modules.

    .venv/bin/python benchmarks/architecture.py
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = ROOT / "components"


def figures() -> tuple[int, int, list[tuple[int, str]]]:
    calls = takers = 0
    sizes = []
    for path in sorted(COMPONENTS.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        sizes.append((len(text.splitlines()), str(path.relative_to(ROOT))))
        in_config = path.relative_to(COMPONENTS).parts[0] == "config"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "operator_module":
                calls += 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not in_config:
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                if any(a.annotation is not None and ast.unparse(a.annotation).strip("'\"") == "PlatformConfig" for a in arguments):
                    takers += 1
    return calls, takers, sorted(sizes)[-3:]


def main() -> None:
    calls, takers, largest = figures()
    print(f"operator_module calls in components/: {calls}")
    print(f"functions outside components/config/ taking the whole PlatformConfig: {takers}")
    print("largest modules: " + ", ".join(f"{path} ({lines} lines)" for lines, path in reversed(largest)))


if __name__ == "__main__":
    main()
