"""Adopting what an operator made by hand, against a real API server: `jail-pvc`
and the munge Secret exist before the stack does (made as the guides make them).
`pulumi import` brings the claim into the `kwok` stack under its component;
`slurm.adoptMungeSecret` has the program import the Secret as it is (its key
kept). Nothing is replaced or re-created: same UIDs, same key, claim still bound.
"""

from __future__ import annotations

import json
import secrets

from components.render.munge import MUNGE_KEY_FIELD, munge_secret_name
from components.render.storage import JAIL_CLAIM, claim_manifest, data_volumes
from scripts.kwok_nodes import stack_config
from tests.kube import KWOK_STACK, wait_until

PROJECT_TYPE = "slurm-platform"


def urn(child_type: str, name: str, parent_type: str | None = None) -> str:
    qualified = f"{parent_type}${child_type}" if parent_type else child_type
    return f"urn:pulumi:{KWOK_STACK}::{PROJECT_TYPE}::{qualified}::{name}"


def test_a_hand_made_jail_claim_is_adopted_without_replacement(ws, cluster):
    config = stack_config(ws.project / f"Pulumi.{KWOK_STACK}.yaml")
    namespace = config.cluster.namespace
    # By hand, as an operator would have made it before Pulumi, as the guide describes it.
    (jail,) = [volume for volume in data_volumes(config) if volume.claim_name == JAIL_CLAIM]
    cluster.kubectl("create", "namespace", namespace)
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(claim_manifest(jail, namespace, config.storage.storage_class.name)))
    wait_until("the hand-made claim to bind", lambda: cluster.get("pvc", JAIL_CLAIM, namespace)["status"].get("phase") == "Bound")
    before = cluster.get("pvc", JAIL_CLAIM, namespace)["metadata"]["uid"]
    # The guide's `kubectl create secret generic ... --from-file=munge.key` with a key of its own.
    secret_name = munge_secret_name(config.cluster.name)
    cluster.kubectl("create", "secret", "generic", secret_name, "-n", namespace, f"--from-literal={MUNGE_KEY_FIELD}={secrets.token_hex(512)}")
    munge_before = cluster.get("secret", secret_name, namespace)
    ws.pulumi("config", "set", "--path", "slurm-platform:slurm.adoptMungeSecret", "true", stack=KWOK_STACK)
    # Adopted objects live in a namespace the stack does not own (a config rule).
    ws.pulumi("config", "set", "--path", "slurm-platform:cluster.createNamespace", "false", stack=KWOK_STACK)

    storage = urn("slurm-platform:storage:Storage", "storage")
    claim_urn = urn("kubernetes:core/v1:PersistentVolumeClaim", f"storage-{JAIL_CLAIM}", "slurm-platform:storage:Storage")
    # Everything else first (the munge Secret imported on the way), the claim to adopt left out.
    ws.pulumi("up", "--yes", "--skip-preview", "--exclude", claim_urn, "--exclude-dependents", stack=KWOK_STACK)
    import_file = ws.root / "adopt.json"
    provider = urn("pulumi:providers:kubernetes", "k8s")
    import_file.write_text(
        json.dumps(
            {
                "nameTable": {"storage": storage, "k8s": provider},
                "resources": [
                    {
                        "type": "kubernetes:core/v1:PersistentVolumeClaim",
                        "name": f"storage-{JAIL_CLAIM}",
                        "id": f"{namespace}/{JAIL_CLAIM}",
                        "parent": "storage",
                        "provider": "k8s",
                    },
                ],
            }
        )
    )
    ws.pulumi("import", "--file", str(import_file), "--yes", "--generate-code=false", stack=KWOK_STACK)

    steps = {step["urn"]: step["op"] for step in ws.preview_steps(stack=KWOK_STACK)}
    # The binder's volumeName and the server's volumeMode are ignored, or this would be a replace.
    assert steps[claim_urn] in ("same", "update"), steps[claim_urn]
    # What --exclude-dependents held back is still to be created; nothing is replaced or deleted.
    assert not [u for u, op in steps.items() if op in ("replace", "create-replacement", "delete", "delete-replaced")]
    ws.pulumi("up", "--yes", "--skip-preview", stack=KWOK_STACK)
    assert cluster.get("pvc", JAIL_CLAIM, namespace)["metadata"]["uid"] == before
    assert cluster.get("pvc", JAIL_CLAIM, namespace)["status"]["phase"] == "Bound"
    ws.pulumi("preview", "--expect-no-changes", stack=KWOK_STACK)
    munge_after = cluster.get("secret", secret_name, namespace)
    assert munge_after["metadata"]["uid"] == munge_before["metadata"]["uid"]
    assert munge_after["data"] == munge_before["data"]
