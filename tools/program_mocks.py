"""The program under the Pulumi SDK's mocks (`pulumi.runtime.set_mocks`), no engine and no
cluster: every resource it registers, with its type, name, inputs, parent, dependencies and
options. What the stack would declare, for the tests and benchmarks (tests/harness.py) and for
`make preflight` (tools/preflight.py), which checks the live cluster against it."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

from components.config import PROJECT


@dataclass
class Registered:
    type: str
    name: str
    urn: str
    inputs: dict[str, Any]
    parent: str
    dependencies: list[str]
    protect: bool
    retain_on_delete: bool
    additional_secret_outputs: list[str]
    custom: bool
    secret_inputs: list[str]
    provider: str
    import_id: str = ""
    ignore_changes: list[str] = field(default_factory=list)
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    read: bool = False


@dataclass
class Run:
    resources: list[Registered] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def of_type(self, type_: str) -> list[Registered]:
        return [r for r in self.resources if r.type == type_]

    def named(self, name: str) -> Registered:
        matches = [r for r in self.resources if r.name == name]
        assert len(matches) == 1, f"{name}: {len(matches)} resources ({[r.name for r in self.resources]})"
        return matches[0]

    def by_urn(self, urn: str) -> Registered:
        return next(r for r in self.resources if r.urn == urn)

    def kubernetes_objects(self) -> list[Registered]:
        """Objects the program declares (reads of live objects excluded)."""
        return [r for r in self.resources if r.type.startswith("kubernetes:") and r.custom and not r.read]

    def longest_dependency_chain(self) -> list[str]:
        """Longest path through explicit and input-derived dependencies (names, first to last)."""
        by_urn = {r.urn: r for r in self.resources}
        memo: dict[str, list[str]] = {}

        def chain(urn: str) -> list[str]:
            if urn not in memo:
                deps = [d for d in by_urn[urn].dependencies if d in by_urn]
                longest = max((chain(d) for d in deps), key=len, default=[])
                memo[urn] = longest + [by_urn[urn].name]
            return memo[urn]

        return max((chain(urn) for urn in by_urn), key=len, default=[])


class RecordingMocks(pulumi.runtime.Mocks):
    """Outputs echo the inputs, plus what the providers would compute.

    `live` stands in for the cluster: outputs by resource type (e.g. a SlurmCluster's
    `status`, a Service's `spec`/`status`) merged over the echo, for created and read resources.
    """

    def __init__(self, stack_outputs: Optional[dict[str, Any]] = None, live: Optional[dict[str, dict[str, Any]]] = None):
        self.stack_outputs = stack_outputs or {}
        self.live = live or {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        outputs = {**dict(args.inputs), **self.live.get(args.typ, {})}
        if args.typ == "random:index/randomPassword:RandomPassword":
            outputs["result"] = "p" * int(args.inputs["length"])
        elif args.typ == "pulumi:pulumi:StackReference":
            outputs["outputs"] = self.stack_outputs
        elif args.typ == "kubernetes:helm.sh/v4:Chart":
            outputs["resources"] = []
        elif args.typ == "kubernetes:core/v1:Secret" and args.resource_id and "data" not in outputs:
            # A Secret read from the cluster (ldap.tls.secretName): a kubernetes.io/tls Secret with its CA.
            outputs["data"] = {key: base64.b64encode(f"-----{key}-----".encode()).decode() for key in ("tls.crt", "tls.key", "ca.crt")}
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: RecordingMocks, run: Run):
        super().__init__(mocks)
        self.run = run

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.run.resources.append(
                Registered(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    inputs=rpc.deserialize_properties_unwrap_secrets(request.object)[0],
                    parent=request.parent,
                    dependencies=list(request.dependencies),
                    protect=bool(request.protect),
                    retain_on_delete=bool(request.retainOnDelete),
                    additional_secret_outputs=list(request.additionalSecretOutputs),
                    custom=bool(request.custom),
                    secret_inputs=_secret_keys(request.object),
                    provider=request.provider,
                    import_id=request.importId,
                    ignore_changes=list(request.ignoreChanges),
                    custom_timeouts={
                        op: getattr(request.customTimeouts, op) for op in ("create", "update", "delete") if getattr(request.customTimeouts, op)
                    },
                )
            )
        return response

    def ReadResource(self, request):
        response = super().ReadResource(request)
        self.run.resources.append(
            Registered(
                type=request.type,
                name=request.name,
                urn=response.urn,
                inputs={},
                parent=request.parent,
                dependencies=list(request.dependencies),
                protect=False,
                retain_on_delete=False,
                additional_secret_outputs=[],
                custom=True,
                secret_inputs=[],
                provider=request.provider,
                import_id=request.id,
                read=True,
            )
        )
        return response


def _secret_keys(struct) -> list[str]:
    """Top-level input keys whose value holds a Pulumi secret (as sent to the engine)."""
    return sorted(key for key, value in struct.fields.items() if rpc._special_secret_sig in json_format.MessageToJson(value))


class _WarningCollector(logging.Handler):
    def __init__(self, run: Run):
        super().__init__(level=logging.WARNING)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        self.run.warnings.append(record.getMessage())


def run_under_mocks(
    program: Callable[[], Any],
    config: Optional[dict[str, Any]] = None,
    stack: str = "test",
    previous_outputs: Optional[dict[str, Any]] = None,
    live: Optional[dict[str, dict[str, Any]]] = None,
) -> Run:
    """Run `program` with `slurm-platform:*` config set; return what it registered.

    `program` may return a dict of outputs; they are resolved into `Run.outputs`.
    """
    run = Run()
    logger = logging.getLogger(f"pulumi-mocks-{id(run)}")
    logger.propagate = False
    logger.addHandler(_WarningCollector(run))
    mocks = RecordingMocks(previous_outputs, live)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, logger=logger, monitor=RecordingMonitor(mocks, run))
    pulumi.runtime.set_all_config({f"{PROJECT}:{k}": json.dumps(v) if not isinstance(v, str) else v for k, v in (config or {}).items()})

    @pulumi.runtime.test
    def execute():
        outputs = program() or {}
        return pulumi.Output.all(**outputs).apply(run.outputs.update) if outputs else None

    execute()
    return run
