"""ONNX control flow: If, Loop and Scan, whose bodies are subgraphs (GRAPH attributes).

kiln compiles straight-line code of static shapes, so control flow is resolved while the
model is imported: an If whose condition is known runs one branch, and one whose condition
depends on a graph input runs both and selects between their results; Loop and Scan are
unrolled, which needs a trip count known at import time (Scan's is its input's length; a
Loop whose condition depends on data runs its static trip count, masked once it stops).
Each body runs through ``node.run_graph`` in a scope that sees the enclosing graph's values.
"""

from __future__ import annotations

import numpy as np

from kiln.onnx.registry import constant, is_traced, op

# An unrolled loop makes one copy of its body per iteration; beyond this the model is
# better served by a runtime loop, which kiln's IR does not have.
MAX_ITERATIONS = 10000

_NEEDS_CONSTANT = "must be known when the model is imported"


def _condition(node, cond, what: str) -> bool:
    value = np.asarray(cond)
    if value.size != 1:
        raise node.error(f"{what} must hold one element, got shape {list(value.shape)}")
    return bool(value.reshape(()))


# ---------------------------------------------------------------- If


@op("If", attributes=("then_branch", "else_branch"), since=1)
def if_(node, cond):
    """One branch when `cond` is known at import time; both, selected elementwise by
    `cond`, when it depends on a graph input (the branches must agree in shape and dtype)."""
    then_branch, else_branch = node.attr("then_branch"), node.attr("else_branch")
    if not is_traced(cond):
        taken = then_branch if _condition(node, cond, "cond") else else_branch
        return tuple(node.run_graph(taken, {}))
    if cond.size != 1:
        raise node.error(f"cond must hold one element, got shape {list(cond.shape)}")
    then_values = node.run_graph(then_branch, {})
    else_values = node.run_graph(else_branch, {})
    selector = cond.reshape(())
    return tuple(
        _select(node, selector, name.name, a, b) for name, a, b in zip(then_branch.output, then_values, else_values)
    )


def _select(node, cond, name: str, then_value, else_value):
    if then_value is None or else_value is None:
        raise node.error(f"output {name!r} is not a tensor in both branches; kiln imports tensors only")
    then_value, else_value = _as_array(then_value), _as_array(else_value)
    if then_value.shape != else_value.shape or then_value.dtype != else_value.dtype:
        raise node.error(
            f"its condition depends on a graph input, and its branches give output {name!r} different shapes "
            f"or dtypes ({list(then_value.shape)} {then_value.dtype} and {list(else_value.shape)} "
            f"{else_value.dtype}); kiln compiles static shapes, so the condition {_NEEDS_CONSTANT}"
        )
    return np.where(cond, then_value, else_value)


def _as_array(value):
    return value if is_traced(value) else np.asarray(value)


# ---------------------------------------------------------------- Loop


@op("Loop", attributes=("body",), since=1)
def loop(node, M=None, cond=None, *v_initial):
    """The body unrolled: loop-carried values threaded through the iterations, scan
    outputs stacked along a new axis 0. The trip count `M` and the initial condition must
    be known at import time. A condition the body computes from data is honoured up to a
    static `M` by masking the carried values of the iterations after it turns false."""
    body = node.attr("body")
    n_carried = len(v_initial)
    n_scan = len(body.output) - 1 - n_carried
    if len(body.input) != 2 + n_carried or n_scan < 0:
        raise node.error(
            f"its body takes {len(body.input)} inputs and gives {len(body.output)} outputs, "
            f"which does not match its {n_carried} loop-carried values"
        )
    trip_count = _trip_count(node, constant(node, M, "M"))
    if cond is not None:
        running = _condition(node, constant(node, cond, "cond"), "cond")
    else:
        running = True
    if trip_count is None and cond is None:
        raise node.error("has neither a trip count M nor a condition: it would never end")
    iteration_dtype = np.asarray(M).dtype if M is not None else np.dtype(np.int64)
    carried = list(v_initial)
    scanned = [[] for _ in range(n_scan)]
    # Once the body's condition depends on data, the remaining iterations of the static trip
    # count still run, each keeping its carried values only where the loop is still `active`.
    active = None
    iteration = 0
    while (active is not None or running) and (trip_count is None or iteration < trip_count):
        if iteration >= MAX_ITERATIONS:
            raise node.error(
                f"runs more than {MAX_ITERATIONS} iterations; kiln unrolls loops at import time and refuses "
                "one this long"
            )
        if active is not None:
            _check_maskable(node, trip_count, n_scan)
        inputs = {
            body.input[0].name: np.asarray(iteration, iteration_dtype),
            body.input[1].name: np.asarray(running) if active is None else active,
        }
        inputs.update((value.name, v) for value, v in zip(body.input[2:], carried))
        outputs = node.run_graph(body, inputs)
        new_carried = list(outputs[1 : 1 + n_carried])
        if active is None:
            carried = new_carried
        else:
            carried = [
                _masked(node, active, new, old, value.name)
                for new, old, value in zip(new_carried, carried, body.input[2:])
            ]
        for values, value in zip(scanned, outputs[1 + n_carried :]):
            values.append(value)
        cond_out = outputs[0]
        if active is None and not is_traced(cond_out):
            running = _condition(node, cond_out, "the body's condition output")
        else:
            if cond_out.size != 1:
                raise node.error(f"the body's condition output must hold one element, got shape {list(cond_out.shape)}")
            cond_out = cond_out.reshape(())
            active = cond_out if active is None else np.logical_and(active, cond_out)
        iteration += 1
    return tuple(carried) + tuple(
        _stack_scan(node, values, body.output[1 + n_carried + k].name) for k, values in enumerate(scanned)
    )


def _check_maskable(node, trip_count, n_scan: int) -> None:
    """A loop whose continuation depends on data can run on masked only to a static trip
    count, and without scan outputs (their length would depend on data)."""
    if trip_count is None:
        raise node.error(
            "its body's condition depends on a graph input and it has no trip count M: kiln unrolls loops and "
            f"needs a static trip count, so the condition {_NEEDS_CONSTANT}"
        )
    if n_scan:
        raise node.error(
            "its body's condition depends on a graph input, so the length of its scan outputs does too; kiln "
            f"compiles static shapes, so the condition {_NEEDS_CONSTANT}"
        )


def _masked(node, active, new, old, name: str):
    new, old = _as_array(new), _as_array(old)
    if new.shape != old.shape or new.dtype != old.dtype:
        raise node.error(
            f"its body's condition depends on a graph input and its loop-carried value {name!r} changes shape "
            f"or dtype ({list(old.shape)} {old.dtype} to {list(new.shape)} {new.dtype}); kiln compiles static "
            f"shapes, so the condition {_NEEDS_CONSTANT}"
        )
    return np.where(active, new, old)


def _trip_count(node, M):
    if M is None:
        return None
    count = int(np.asarray(M).reshape(()))
    if count > MAX_ITERATIONS:
        raise node.error(
            f"has a trip count of {count}; kiln unrolls loops at import time and refuses more than "
            f"{MAX_ITERATIONS} iterations"
        )
    return max(count, 0)


def _stack_scan(node, values: list, name: str):
    if not values:
        raise node.error(
            f"runs no iteration, so the shape of its scan output {name!r} is unknown; kiln compiles static shapes"
        )
    shapes = {tuple(v.shape) for v in values}
    if len(shapes) != 1:
        raise node.error(f"its scan output {name!r} changes shape across iterations ({sorted(shapes)})")
    return np.stack([_as_array(v) for v in values])


# ---------------------------------------------------------------- Scan


@op(
    "Scan",
    attributes=(
        "body",
        "num_scan_inputs",
        "directions",
        "scan_input_axes",
        "scan_input_directions",
        "scan_output_axes",
        "scan_output_directions",
    ),
    since=8,
)
def scan(node, *inputs):
    """The body unrolled over the scan inputs' slices; opset 8's batched form (a leading
    batch axis, sequence_lens) runs the scan once per batch entry."""
    if node.opset < 9:
        return _scan_batched(node, inputs[0], list(inputs[1:]))
    for name in ("directions",):
        if name in node:
            raise node.error(f"attribute {name!r} belongs to opset 8's Scan")
    return _scan(node, list(inputs), node.ints("scan_input_directions"))


def _scan(node, inputs: list, input_directions):
    body = node.attr("body")
    n_scan_in = node.attr("num_scan_inputs")
    n_state = len(inputs) - n_scan_in
    if n_state < 0 or len(body.input) != len(inputs):
        raise node.error(f"its body takes {len(body.input)} inputs, and it is given {len(inputs)}")
    n_scan_out = len(body.output) - n_state
    state, sequences = inputs[:n_state], [_as_array(x) for x in inputs[n_state:]]
    in_axes = _per_scan(node, node.ints("scan_input_axes"), n_scan_in, "scan_input_axes")
    in_directions = _per_scan(node, input_directions, n_scan_in, "scan_input_directions")
    out_axes = _per_scan(node, node.ints("scan_output_axes"), n_scan_out, "scan_output_axes")
    out_directions = _per_scan(node, node.ints("scan_output_directions"), n_scan_out, "scan_output_directions")
    # Each scan input with its scan axis first, reversed where it is scanned backwards.
    sequences = [
        _leading(node, x, axis, direction, "scan input")
        for x, axis, direction in zip(sequences, in_axes, in_directions)
    ]
    lengths = {x.shape[0] for x in sequences}
    if len(lengths) != 1:
        raise node.error(f"its scan inputs have different lengths along their scan axes ({sorted(lengths)})")
    (length,) = lengths
    if length > MAX_ITERATIONS:
        raise node.error(f"scans {length} slices; kiln unrolls scans and refuses more than {MAX_ITERATIONS}")
    scanned = [[] for _ in range(n_scan_out)]
    for t in range(length):
        bound = dict(zip((v.name for v in body.input), state + [x[t] for x in sequences]))
        outputs = node.run_graph(body, bound)
        state = list(outputs[:n_state])
        for values, value in zip(scanned, outputs[n_state:]):
            values.append(value)
    results = []
    for k, (values, axis, direction) in enumerate(zip(scanned, out_axes, out_directions)):
        stacked = _stack_scan(node, values, body.output[n_state + k].name)
        results.append(_placed(node, stacked, axis, direction))
    return tuple(state) + tuple(results)


def _per_scan(node, values, count: int, name: str) -> list:
    if values is None:
        return [0] * count
    if len(values) != count:
        raise node.error(f"{name} has {len(values)} entries for {count} scan values")
    return list(values)


def _direction(node, direction: int, name: str) -> bool:
    if direction not in (0, 1):
        raise node.error(f"{name} directions must be 0 (forward) or 1 (reverse), got {direction}")
    return direction == 1


def _leading(node, x, axis: int, direction: int, what: str):
    """`x` with its scan `axis` moved first, reversed when scanned backwards."""
    if not -x.ndim <= axis < x.ndim:
        raise node.error(f"{what} axis {axis} is out of range for rank {x.ndim}")
    x = np.moveaxis(x, axis, 0) if axis % x.ndim else x
    return x[::-1] if _direction(node, direction, what) else x


def _placed(node, stacked, axis: int, direction: int):
    """A stacked scan output (iterations first) reversed if written backwards, with its
    iteration axis moved to `axis`."""
    if _direction(node, direction, "scan output"):
        stacked = stacked[::-1]
    if not -stacked.ndim <= axis < stacked.ndim:
        raise node.error(f"scan output axis {axis} is out of range for rank {stacked.ndim}")
    return np.moveaxis(stacked, 0, axis) if axis % stacked.ndim else stacked


def _scan_batched(node, sequence_lens, inputs: list):
    """Opset 8: every input has a batch axis 0 and scan inputs scan along axis 1; each batch
    entry is scanned on its own. Only full-length sequences are supported (sequence_lens
    absent or equal to the scan length), as a shorter one would make ragged outputs."""
    for name in ("scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"):
        if name in node:
            raise node.error(f"attribute {name!r} is not part of opset 8's Scan")
    n_scan_in = node.attr("num_scan_inputs")
    inputs = [_as_array(x) for x in inputs]
    batch = inputs[0].shape[0]
    length = inputs[len(inputs) - n_scan_in].shape[1]
    if sequence_lens is not None:
        lens = constant(node, sequence_lens, "sequence_lens")
        if np.any(lens != length):
            raise node.error(
                f"sequence_lens {lens.tolist()} differ from the scan length {length}; kiln supports full-length "
                "sequences only"
            )
    directions = node.ints("directions")
    per_batch = [_scan(node, [x[b] for x in inputs], directions) for b in range(batch)]
    return tuple(np.stack([outputs[k] for outputs in per_batch]) for k in range(len(per_batch[0])))


# ---------------------------------------------------------------- optionals of tensors


@op("OptionalHasElement", since=15)
def optional_has_element(node, input=None):
    """Whether the input is there. kiln's values are tensors, never empty optionals, so
    only a missing input is "no element"."""
    return np.asarray(input is not None)


@op("OptionalGetElement", since=15)
def optional_get_element(node, input=None):
    """A tensor is its own element (opset 18 on); an optional holding one arrives as that tensor."""
    if input is None:
        raise node.error("has no input: an empty optional has no element")
    return input
