"""The program under the real Pulumi engine (render mode, file backend), on
the toolchain scripts/install-pulumi.sh builds. Prints figures; asserts nothing.

- `pulumi preview` of the local stack against a one-resource program: the
  engine's fixed cost and the ratio;
- preview time at three stack sizes (the local stack, then more jail submounts
  and Karpenter-provisioned GPU pools) and the cost per resource at each;
- the policy pack's share of the local stack's preview time.

Each figure is the median of REPEATS runs, all in one run on one toolchain.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.engine import Workspace, new_workspace  # noqa: E402

REPEATS = 3
POLICY_PACK = ["--policy-pack", "policies", "--policy-pack-config", "policies/config/local.json"]
ONE_RESOURCE_PROGRAM = {
    "Pulumi.yaml": yaml.safe_dump({"name": "one-resource", "runtime": {"name": "python", "options": {"virtualenv": ".venv"}}}),
    "__main__.py": """\
import pulumi
import pulumi_kubernetes as k8s

provider = k8s.Provider("k8s", render_yaml_to_directory="rendered")
k8s.core.v1.ConfigMap("one", data={"key": "value"}, opts=pulumi.ResourceOptions(provider=provider))
""",
}


def median_seconds(ws: Workspace, *args: str, stack: str) -> float:
    seconds = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        ws.pulumi(*args, stack=stack)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def resource_count(ws: Workspace, stack: str) -> int:
    """Resources in the plan, the stack and providers included."""
    return len(ws.preview_steps(stack=stack))


def scaled_stack(ws: Workspace, name: str, submounts: int, pools: list[dict], base: str = "local", kubernetes: dict | None = None) -> str:
    """Stack `name`: stack `base` with `submounts` more jail submounts and `pools` more node pools."""
    document = yaml.safe_load((ws.project / f"Pulumi.{base}.yaml").read_text())
    config = document["config"]
    config["slurm-platform:nodePools"] += pools
    config["slurm-platform:storage"]["submounts"] += [
        {"name": f"data-{i:03d}", "mountPath": f"/mnt/data-{i:03d}", "size": "1Ti"} for i in range(submounts)
    ]
    if kubernetes is not None:
        config["slurm-platform:kubernetes"] = kubernetes
    document.pop("encryptionsalt", None)  # the new stack gets its own
    (ws.project / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(document))
    ws.pulumi("stack", "init", name, "--secrets-provider", "passphrase", stack=None)
    return name


def karpenter_gpu_pools(ws: Workspace, count: int) -> list[dict]:
    """`count` copies of the local stack's GPU pool, each provisioned by Karpenter."""
    gpu_pool = yaml.safe_load((ws.project / "Pulumi.local.yaml").read_text())["config"]["slurm-platform:nodePools"][0]
    return [{**gpu_pool, "name": f"gpu-{i:03d}", "selector": {"worker.fptcloud/pool": f"gpu-{i:03d}"}, "karpenter": {}} for i in range(count)]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        one = new_workspace(Path(tmp) / "one", "one", program=ONE_RESOURCE_PROGRAM)
        ws = new_workspace(Path(tmp) / "platform")
        one_seconds = median_seconds(one, "preview", stack="one")
        print(f"one-resource program: resources={resource_count(one, 'one'):>4} preview_median={one_seconds:6.2f} s")

        sizes = [("local", "local")] + [
            (label, scaled_stack(ws, label, submounts, karpenter_gpu_pools(ws, pools), kubernetes={"renderYamlToDirectory": f"rendered-{label}"}))
            for label, submounts, pools in (("medium", 50, 12), ("large", 220, 60))
        ]
        for label, stack in sizes:
            count = resource_count(ws, stack)
            seconds = median_seconds(ws, "preview", stack=stack)
            print(
                f"{label:<6} stack:         resources={count:>4} preview_median={seconds:6.2f} s "
                f"per_resource={seconds / count * 1000:6.1f} ms "
                f"above_one_resource={(seconds - one_seconds) / count * 1000:6.1f} ms/resource "
                f"ratio_to_one_resource={seconds / one_seconds:4.2f}x"
            )

        without_pack = median_seconds(ws, "preview", stack="local")
        with_pack = median_seconds(ws, "preview", *POLICY_PACK, stack="local")
        print(
            f"policy pack on local: preview {without_pack:6.2f} s without, {with_pack:6.2f} s with: "
            f"{(with_pack - without_pack) / with_pack * 100:4.1f}% of the preview (n={REPEATS})"
        )


if __name__ == "__main__":
    main()
