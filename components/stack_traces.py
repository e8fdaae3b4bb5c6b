"""The stack trace the state keeps of each resource: the program's own frames.

With every resource it registers, the Python SDK sends the whole call stack beneath the
resource's constructor down to the language host (the SDK's stack runner, asyncio's event
loop, pulumi-language-python-exec), and the engine keeps it in the state: about 1.2 kB of
each resource's state, more than most resources' inputs, written again with every checkpoint.
What a reader of the state can use is where the program declared the resource and what in the
program declared it: the frames in the program's files. The first frame, which the SDK takes
for the resource's source position, is always kept.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pulumi.runtime import resource as sdk_resource
from pulumi.runtime.proto import source_pb2

# The project's root as the SDK writes a frame's file (a file: URI); installed packages sit in its .venv.
PROGRAM_ROOT = Path(__file__).resolve().parent.parent.as_uri() + "/"
INSTALLED = "/site-packages/"


def in_program(uri: str) -> bool:
    """Whether a frame's file is one of the program's own (not an installed package, not outside the project)."""
    return uri.startswith(PROGRAM_ROOT) and INSTALLED not in uri


def program_frames(trace: source_pb2.StackTrace) -> source_pb2.StackTrace:
    """`trace` less the frames outside the program; its first frame (the source position) kept whatever it is."""
    if not trace.frames:
        return trace
    first, *callers = trace.frames
    return source_pb2.StackTrace(frames=[first, *(frame for frame in callers if in_program(frame.pc.uri))])


def keep_program_frames() -> None:
    """From now on, register every resource with only the program's frames of its stack trace."""
    full = sdk_resource._get_stack_trace
    if hasattr(full, "__wrapped__"):  # the program ran before in this process (the tests run it under mocks)
        return

    @functools.wraps(full)
    def trimmed() -> source_pb2.StackTrace:
        return program_frames(full())

    sdk_resource._get_stack_trace = trimmed
