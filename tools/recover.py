"""`make recover STACK=<stack>`: the recovery after a CLI killed outright (SIGKILL: a hard-cancelled CI
job) in the middle of an update, as one command.

Such a kill leaves the stack's lock and, in its state, the creates that were in flight as pending
operations: every later command stops on the lock, and an `up` asks what to do with them. This:
1. removes the lock (`pulumi cancel`);
2. looks each pending create up in the cluster of the current kubeconfig (`kubectl get`): one that
   exists is imported (`pulumi refresh --import-pending-creates <urn> <id>`: the state takes the live
   object, so the next up updates it instead of creating it again); one that does not, or is no
   Kubernetes object (a random key), is cleared from the state (the next up creates it);
3. says what it did. Reads only from the cluster; writes only the stack's state.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any


def pulumi(stack: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["pulumi", *args, "--stack", stack, "--non-interactive"], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise SystemExit(f"pulumi {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result


def kubernetes_object(resource: dict[str, Any]) -> tuple[str, str, str] | None:
    """(kubectl resource, name, namespace) of a pending create that is a Kubernetes object, else None."""
    parts = resource["type"].split(":")
    if parts[0] != "kubernetes" or len(parts) != 3 or "/" not in parts[1] or parts[1].startswith("helm.sh/"):
        return None
    group, version = parts[1].rsplit("/", 1)
    metadata = (resource.get("inputs") or {}).get("metadata") or {}
    if not isinstance(metadata.get("name"), str):
        return None
    return f"{parts[2].lower()}.{version}.{'' if group == 'core' else group}", metadata["name"], metadata.get("namespace") or ""


def exists(kubectl: str, kind: str, name: str, namespace: str) -> bool:
    args = [kubectl, "get", kind, name, "-o", "name", *(["-n", namespace] if namespace else []), "--request-timeout=20s"]
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode == 0:
        return True
    if "NotFound" in result.stderr or "the server doesn't have a resource type" in result.stderr:
        return False
    raise SystemExit(f"cannot tell whether {kind} {namespace}/{name} exists: {result.stderr.strip()}")


def recover(stack: str, kubectl: str) -> dict[str, list[str]]:
    cancelled = pulumi(stack, "cancel", "--yes", check=False)
    print((cancelled.stdout + cancelled.stderr).strip() or "pulumi cancel: done")
    exported = json.loads(pulumi(stack, "stack", "export").stdout)
    pending = [op for op in exported["deployment"].get("pending_operations") or [] if op["type"] == "creating"]
    imports: list[tuple[str, str]] = []
    cleared: list[str] = []
    for operation in pending:
        resource = operation["resource"]
        found = kubernetes_object(resource)
        if found and exists(kubectl, *found):
            _, name, namespace = found
            imports.append((resource["urn"], f"{namespace}/{name}" if namespace else name))
        else:
            cleared.append(resource["urn"])
    if cleared:
        # Dropped from the state: the next up creates them.
        exported["deployment"]["pending_operations"] = [
            op for op in exported["deployment"].get("pending_operations") or [] if op["resource"]["urn"] not in cleared
        ]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as state:
            json.dump(exported, state)
        try:
            pulumi(stack, "stack", "import", "--file", state.name)
        finally:
            os.unlink(state.name)
    if imports:
        pairs = [arg for urn, object_id in imports for arg in ("--import-pending-creates", urn, "--import-pending-creates", object_id)]
        pulumi(stack, "refresh", "--yes", "--skip-preview", *pairs)
    return {"imported": [urn for urn, _ in imports], "cleared": cleared}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--kubectl", default=os.environ.get("KUBECTL", "kubectl"))
    args = parser.parse_args(argv)
    done = recover(args.stack, args.kubectl)
    for what, urns in done.items():
        print(f"{what}: {len(urns)}")
        for urn in urns:
            print(f"  {urn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
