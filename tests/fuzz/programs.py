"""Random tensor programs for differential testing: kiln against numpy.

A program is a list of steps over numbered values (the inputs first). Each
step applies one numpy operation to earlier values, with shapes worked out
while drawing so that every program is valid numpy. `run` evaluates a
program with numpy functions, so the same code runs eagerly on arrays (the
reference) and under kiln's tracer (the compiled function).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import kiln

DIMS = (1, 2, 3, 5, 7)

UNARY = {
    "negative": np.negative, "abs": np.abs, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "sqrt_abs": lambda x: np.sqrt(np.abs(x)), "exp_tanh": lambda x: np.exp(np.tanh(x)),
    "log1p_abs": lambda x: np.log(1.0 + np.abs(x)), "relu": lambda x: np.maximum(x, 0.0),
    "square": lambda x: x * x, "sigmoid": kiln.sigmoid,
}
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "safe_divide": lambda x, y: x / (1.0 + np.abs(y)),
    "where_greater": lambda x, y: np.where(x > y, x, y),
}
REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}
# Differentiable everywhere, so that finite differences are a fair reference for gradients.
SMOOTH = {"negative", "tanh", "sin", "cos", "exp_tanh", "square", "sigmoid", "add", "subtract", "multiply",
          "sum", "mean"}


@dataclass
class Program:
    input_shapes: list
    dtype: type
    smooth: bool
    steps: list = field(default_factory=list)  # (kind, name, operand indices, parameters)
    shapes: list = field(default_factory=list)  # every value's shape, inputs first

    def describe(self) -> str:
        lines = [f"inputs: {self.input_shapes} {np.dtype(self.dtype).name}"]
        for k, (kind, name, operands, params) in enumerate(self.steps):
            target = len(self.input_shapes) + k
            lines.append(f"  v{target} = {name}({', '.join(f'v{i}' for i in operands)}{', ' if params else ''}"
                         f"{', '.join(f'{a}={b}' for a, b in params.items())})  # {self.shapes[target]}")
        return "\n".join(lines)


def run(program: Program, inputs):
    values = list(inputs)
    for kind, name, operands, params in program.steps:
        args = [values[i] for i in operands]
        if kind == "unary":
            values.append(UNARY[name](*args))
        elif kind == "binary":
            values.append(BINARY[name](*args))
        elif kind == "scalar":
            values.append(args[0] * params["c"] + params["d"])
        elif kind == "reduce":
            values.append(REDUCE[name](args[0], axis=params["axis"], keepdims=params["keepdims"]))
        elif kind == "transpose":
            values.append(np.transpose(args[0]))
        elif kind == "reshape":
            values.append(np.reshape(args[0], params["shape"]))
        elif kind == "slice":
            values.append(args[0][params["start"]::params["step"]])
        elif kind == "matmul":
            values.append(args[0] @ args[1])
        elif kind == "softmax":
            values.append(kiln.softmax(args[0]))
        else:
            raise AssertionError(kind)
    # every value nobody consumed is a result, so that no step is dead code
    used = {i for _, _, operands, _ in program.steps for i in operands}
    results = [values[i] for i in range(len(program.input_shapes), len(values)) if i not in used]
    return tuple(results) if results else values[-1]


def _broadcasts(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


@st.composite
def programs(draw, max_steps: int = 8, dtypes=(np.float64, np.float32), smooth: bool = False):
    """Random programs; `smooth` ones use only operations differentiable everywhere."""
    dtype = draw(st.sampled_from(dtypes))
    base = tuple(draw(st.lists(st.sampled_from(DIMS), min_size=0, max_size=3)))
    shapes = [base]
    for _ in range(draw(st.integers(0, 2))):  # more inputs, broadcastable against the first
        keep = draw(st.integers(0, len(base)))
        shapes.append(tuple(d if draw(st.booleans()) else 1 for d in base[len(base) - keep:]))
    program = Program(list(shapes), dtype, smooth, [], list(shapes))
    for _ in range(draw(st.integers(1, max_steps))):
        _draw_step(draw, program)
    return program


def _allowed(program: Program, table: dict) -> list:
    return sorted(name for name in table if not program.smooth or name in SMOOTH)


def _draw_step(draw, program: Program) -> None:
    shapes = program.shapes
    i = draw(st.integers(0, len(shapes) - 1))
    shape = shapes[i]
    kinds = ["unary", "binary", "scalar"]
    if shape:
        kinds += ["reduce", "transpose", "reshape", "slice", "softmax"]
    partners = [j for j, s in enumerate(shapes) if len(shape) == 2 and len(s) == 2 and s[0] == shape[1]]
    if partners:
        kinds.append("matmul")
    kind = draw(st.sampled_from(kinds))
    operands, params, name = [i], {}, kind
    if kind == "unary":
        name = draw(st.sampled_from(_allowed(program, UNARY)))
        out = shape
    elif kind == "binary":
        name = draw(st.sampled_from(_allowed(program, BINARY)))
        j = draw(st.sampled_from([j for j, s in enumerate(shapes) if _broadcasts(shape, s)]))
        operands.append(j)
        out = np.broadcast_shapes(shape, shapes[j])
    elif kind == "scalar":
        params = {"c": draw(st.sampled_from([-1.5, 0.5, 2.0])), "d": draw(st.sampled_from([0.0, 1.0, -0.25]))}
        out = shape
    elif kind == "reduce":
        name = draw(st.sampled_from(_allowed(program, REDUCE)))
        axis = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
        keepdims = draw(st.booleans())
        params = {"axis": axis, "keepdims": keepdims}
        out = np.empty(shape)[...].sum(axis=axis, keepdims=keepdims).shape
    elif kind == "transpose":
        out = shape[::-1]
    elif kind == "reshape":
        size = int(np.prod(shape))
        target = draw(st.sampled_from([(size,), (1, size), (size, 1)] + ([shape[::-1]] if size == int(np.prod(shape[::-1])) else [])))
        params = {"shape": target}
        out = target
    elif kind == "slice":
        params = {"start": draw(st.integers(0, shape[0] - 1)), "step": draw(st.sampled_from([1, 2, 3]))}
        out = (len(range(params["start"], shape[0], params["step"])),) + shape[1:]
    elif kind == "matmul":
        j = draw(st.sampled_from(partners))
        operands.append(j)
        out = (shape[0], shapes[j][1])
    else:  # softmax over the last axis
        out = shape
    program.steps.append((kind, name, operands, params))
    shapes.append(tuple(out))


def inputs_for(program: Program, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(program.dtype) for s in program.input_shapes]


def tolerance(dtype) -> float:
    return 2e-4 if dtype == np.float32 else 1e-9


def check(program: Program, seed: int, target: str = "cpu") -> None:
    """Compile the program and compare it with numpy; an AssertionError describes the program."""
    inputs = inputs_for(program, seed)
    want = run(program, inputs)
    got = kiln.compile(lambda *xs: run(program, xs), target=target)(*inputs)
    want_list = list(want) if isinstance(want, tuple) else [want]
    got_list = list(got) if isinstance(got, tuple) else [got]
    tol = tolerance(program.dtype)
    assert len(got_list) == len(want_list)
    for k, (g, w) in enumerate(zip(got_list, want_list)):
        g, w = np.asarray(g), np.asarray(w)
        scale = 1.0 + float(np.max(np.abs(w))) if w.size and np.all(np.isfinite(w)) else 1.0
        message = f"result {k} differs for seed {seed}:\n{program.describe()}"
        assert g.shape == w.shape and g.dtype == w.dtype, message + f"\n{g.shape} {g.dtype} != {w.shape} {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=message)


def check_gradient(program: Program, seed: int) -> None:
    """kiln.grad of a weighted sum of the program's results against float64 central differences."""
    inputs = [x.astype(np.float64) for x in inputs_for(program, seed)]
    rng = np.random.default_rng(seed + 1)
    results = run(program, inputs)
    weights = [rng.standard_normal(np.shape(r)) for r in (results if isinstance(results, tuple) else [results])]

    def loss(*xs):
        outs = run(program, xs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return sum((o * w).sum() for o, w in zip(outs, weights))

    try:
        kiln.gradcheck(loss, *inputs, argnums=tuple(range(len(inputs))), atol=1e-6, rtol=1e-5)
    except kiln.GradientMismatchError as exc:
        raise AssertionError(f"gradient differs for seed {seed}:\n{program.describe()}\n{exc}") from None


def random_schedule(module, rng, length: int = 6) -> list:
    """A random legal schedule for a lowered module: steps drawn at random (split, tile,
    reorder, unroll, unroll_jam, vectorize, parallel on random loops), kept when legal."""
    from kiln.dialects import affine as A
    from kiln.passes.loop_transforms import ScheduleError
    from kiln.passes.schedule import apply_step

    applied = []
    for _ in range(length * 4):
        if len(applied) == length:
            break
        function = module.body.ops[-1]
        loops = [op for op in function.walk() if isinstance(op, A.ForOp)]
        if not loops:
            break
        loop = rng.choice(loops)
        name = loop.induction_variable.name_hint
        body = [op for op in loop.body.ops if not isinstance(op, A.YieldOp)]
        primitive = rng.choice(["split", "unroll", "unroll_jam", "vectorize", "parallel", "reorder", "tile"])
        if primitive in ("split", "unroll", "unroll_jam"):
            step = [primitive, name, rng.choice([2, 3, 4, 5])]
        elif primitive == "vectorize":
            step = [primitive, name, rng.choice([2, 4, 8, 16])]
        elif primitive == "parallel":
            step = [primitive, name]
        elif len(body) == 1 and isinstance(body[0], A.ForOp):
            inner = body[0].induction_variable.name_hint
            step = ["reorder", [inner, name]] if primitive == "reorder" else \
                ["tile", [name, inner], [rng.choice([2, 3, 4]), rng.choice([2, 3, 4])]]
        else:
            continue
        trial = module.clone({})
        try:
            apply_step(trial.body.ops[-1], step)
        except ScheduleError:
            continue
        module = trial
        applied.append(step)
    return applied


def check_schedule(program: Program, seed: int) -> list:
    """Compile the program under a random legal schedule; compare with numpy. Returns the steps."""
    import random

    inputs = inputs_for(program, seed)
    fn = lambda *xs: run(program, xs)  # noqa: E731
    lowered = kiln.compile(fn).lower(*inputs)
    steps = random_schedule(lowered.module("affine").clone({}), random.Random(seed))
    want = run(program, inputs)
    got = kiln.compile(fn, schedule=kiln.Schedule(steps))(*inputs)
    want_list = list(want) if isinstance(want, tuple) else [want]
    got_list = list(got) if isinstance(got, tuple) else [got]
    tol = tolerance(program.dtype)
    for k, (g, w) in enumerate(zip(got_list, want_list)):
        w = np.asarray(w)
        scale = 1.0 + float(np.max(np.abs(w))) if w.size and np.all(np.isfinite(w)) else 1.0
        np.testing.assert_allclose(np.asarray(g), w, rtol=tol, atol=tol * scale,
                                   err_msg=f"result {k} differs under schedule {steps} for seed {seed}:\n"
                                           f"{program.describe()}")
    return steps
