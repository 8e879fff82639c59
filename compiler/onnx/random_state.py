"""Where an imported model's random ops get their keys.

An ONNX graph has no key input, and ONNX says only that a node's ``seed`` attribute makes
its draws reproducible (onnxruntime seeds one generator per node and session and advances
it on every run). kiln keeps draws out of the compiled code's constants: a model with a
random op gets one more argument, ``random_state`` (``uint32[4]``), which ``OnnxFunction``
fills on every call unless the caller passes it: words 0-1 are drawn from the operating
system when the model is loaded, words 2-3 count the calls. Each node folds the call count
into its key, so every call draws anew:

- a node with ``seed`` starts from ``kiln.random.key(bits of the float seed)``: the same
  sequence of draws, call after call, in every process that loads the model;
- a node without one starts from the load's own entropy (words 0-1) and folds in its node
  index, so two unseeded nodes draw independently and a new load draws differently.

Passing ``random_state=`` explicitly replays a call.
"""

from __future__ import annotations

import secrets
import threading

import numpy as np

from kiln import random

# The ops that draw; Dropout only in training mode, which it decides itself.
RANDOM_OPS = frozenset(("RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli",
                        "Multinomial", "Dropout"))  # fmt: skip


def draws_random(nodes) -> bool:
    """Whether one of a graph's top-level `nodes` may draw random numbers."""
    return any(node.op_type in RANDOM_OPS and (node.op_type != "Dropout" or len(node.input) > 2)
               for node in nodes)  # fmt: skip


class CallCounter:
    """The ``random_state`` of successive calls: this load's entropy and the call count."""

    def __init__(self):
        self._entropy = secrets.randbits(64)
        self._calls = 0
        self._lock = threading.Lock()  # calls from several threads each get their own count

    def next_state(self) -> np.ndarray:
        with self._lock:
            calls, self._calls = self._calls, self._calls + 1
        words = (self._entropy >> 32, self._entropy, calls >> 32, calls)
        return np.array([w & 0xFFFFFFFF for w in words], np.uint32)


def node_key(node, state):
    """The key `node` draws with in the call whose ``random_state`` is `state`."""
    if "seed" in node:
        seed = int(np.asarray(node.attr("seed"), np.float32).view(np.uint32))  # the float's bits
        base = random.key(seed)
    else:
        base = random.fold_in(state[:2], node.index)
    return random.fold_in(random.fold_in(base, state[2]), state[3])
