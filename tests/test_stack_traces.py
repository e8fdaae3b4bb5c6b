"""The stack trace the state keeps of each resource: the program's frames only (components/stack_traces.py)."""

import inspect

from pulumi.runtime import resource as sdk_resource
from pulumi.runtime.proto import source_pb2

from components.stack_traces import PROGRAM_ROOT, in_program, keep_program_frames, program_frames


def frame(uri: str) -> source_pb2.StackFrame:
    return source_pb2.StackFrame(pc=source_pb2.SourcePosition(uri=uri, line=1) if uri else None)


def uris(trace: source_pb2.StackTrace) -> list[str]:
    return [f.pc.uri for f in trace.frames]


def test_program_frames_keep_the_first_frame_and_the_programs_own():
    declared_in = f"{PROGRAM_ROOT}.venv/lib/python3.11/site-packages/pulumi_kubernetes/yaml/v2/config_group.py"
    trace = source_pb2.StackTrace(
        frames=[
            frame(declared_in),
            frame(f"{PROGRAM_ROOT}components/platform.py"),
            frame(""),  # a frame the SDK could not place (frozen runpy)
            frame(f"{PROGRAM_ROOT}.venv/lib/python3.11/site-packages/pulumi/runtime/stack.py"),
            frame("file:///usr/lib/python3.11/asyncio/base_events.py"),
            frame(f"{PROGRAM_ROOT}__main__.py"),
        ]
    )
    assert uris(program_frames(trace)) == [declared_in, f"{PROGRAM_ROOT}components/platform.py", f"{PROGRAM_ROOT}__main__.py"]
    assert uris(program_frames(source_pb2.StackTrace())) == []


def test_the_sdk_registers_resources_with_the_programs_frames_only(monkeypatch):
    # The SDK's own function, whether or not the program ran before in this process; put back afterwards.
    monkeypatch.setattr(sdk_resource, "_get_stack_trace", inspect.unwrap(sdk_resource._get_stack_trace))

    class Resource:
        def __init__(self):
            self.trace = sdk_resource._get_stack_trace()

    class CustomResource(Resource):
        def __init__(self):
            super().__init__()

    class Declared(CustomResource):
        def __init__(self):
            super().__init__()

    full = Declared().trace
    # Under pytest the stack runs through pytest and pluggy (installed packages): the SDK sends them all.
    assert [uri for uri in uris(full)[1:] if not in_program(uri)]
    keep_program_frames()
    keep_program_frames()  # once only: running the program again does not wrap the SDK's function twice
    trimmed = Declared().trace
    assert uris(trimmed)[0] == uris(full)[0] and uris(trimmed)[0].endswith("tests/test_stack_traces.py")
    assert all(in_program(uri) for uri in uris(trimmed)[1:])
    assert len(trimmed.frames) < len(full.frames)
