"""The command's guard against what a Dask cluster sends it: nothing is unpickled, and a
worker's reply is JSON bounded in size and nesting before it is parsed.

Dask unpickles in the client wherever a message carries a pickle: a task's result serialised
with "pickle" or "dask", an exception or traceback a worker raised, a "warn" event. Any peer
that reaches the scheduler can send those. While the command is connected, `refuse_pickles`
makes each of those places yield a RefusedPickle instead of loading the pickle; a reply the
command expects is bytes (msgpack carries them as they are).
"""

from __future__ import annotations

import json
import pickle as _pickle
from typing import Any

from autograder.intake.jsonscan import scan

REFUSED = "<data from the cluster that the command does not unpickle>"
MAX_REPLY_BYTES = 256 * 1024 * 1024  # a chunk's reply: its notebooks, graded, and their pages
MAX_REPLY_DEPTH = 16  # the deepest a worker's honest reply is nested is 7
MAX_REPLY_VALUES = 1_000_000


class BadReply(ValueError):
    """A worker's reply is not what an honest worker sends."""


class RefusedPickle(Exception):
    """What the command holds in place of a pickle from the cluster: an exception, since Dask
    expects one where a worker's error would be."""


def _placeholder(*args: Any, **kwargs: Any) -> RefusedPickle:
    return RefusedPickle(REFUSED)


def _refuse(*args: Any, **kwargs: Any):
    raise TypeError("the grading command does not unpickle what the cluster sends")


class _NoLoads:
    """`pickle` without loads, for distributed.client's handler of "warn" events."""

    loads = staticmethod(_refuse)

    def __getattr__(self, name: str) -> Any:
        return getattr(_pickle, name)


def refuse_pickles():
    """Stop this process loading pickles from the cluster; returns the function that undoes
    it (the command calls it when it closes its client)."""
    import sys

    import distributed.client  # noqa: F401 (imports the modules below)

    # By sys.modules: `distributed.protocol.serialize` is also the name of a function.
    client_module = sys.modules["distributed.client"]
    dask_pickle = sys.modules["distributed.protocol.pickle"]
    serialize = sys.modules["distributed.protocol.serialize"]

    saved_loads, saved_client_pickle = dask_pickle.loads, client_module.pickle
    saved_families = dict(serialize.families)
    dask_pickle.loads = _placeholder
    client_module.pickle = _NoLoads()
    for name, (dumps, _loads, context) in saved_families.items():
        if name not in ("msgpack", "error"):
            serialize.families[name] = (dumps, _placeholder, context)

    def restore() -> None:
        dask_pickle.loads, client_module.pickle = saved_loads, saved_client_pickle
        serialize.families.clear()
        serialize.families.update(saved_families)

    return restore




def _scan(data: bytes, max_depth: int, max_values: int) -> None:
    """Count the nesting and the values of JSON text without parsing it (intake.jsonscan)."""
    over = scan(data, max_values, max_depth).over
    if over == "items":
        raise BadReply(f"it holds more than {max_values} values")
    if over == "depth":
        raise BadReply(f"it is nested more than {max_depth} levels deep")


def read_reply(data: object, max_bytes: int = MAX_REPLY_BYTES,
               max_depth: int = MAX_REPLY_DEPTH, max_values: int = MAX_REPLY_VALUES) -> Any:
    """A worker's reply: bytes of JSON, bounded before they are parsed; BadReply otherwise."""
    if not isinstance(data, (bytes, bytearray)):
        raise BadReply(f"it is a {type(data).__name__}, not the bytes of JSON a worker sends")
    if len(data) > max_bytes:
        raise BadReply(f"it is {len(data)} bytes, over {max_bytes}")
    _scan(bytes(data), max_depth, max_values)
    try:
        return json.loads(data)
    except ValueError as err:
        raise BadReply(f"it is not JSON ({err})") from err
