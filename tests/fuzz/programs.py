"""Random tensor programs for differential testing: kiln against numpy.

A program is a list of steps over numbered values (the inputs first). Each
step applies one operation of `OPS` to earlier values. While a program is
drawn, each step is applied to stand-in values of the right shapes and dtypes,
so numpy itself decides a step's result type and whether the step is valid at
all: a step numpy rejects, or whose result has a dtype kiln does not support,
is not drawn. `run` evaluates a program with numpy functions, so the same code
runs eagerly on arrays (the reference) and under kiln's tracer.

What can be drawn (each input feature is a switch of `programs`):

- dtypes: float32 and float64, the integer types kiln supports and bool;
  with `mixed`, the inputs of one program may have different dtypes;
- inputs: arrays of rank 0-3 with dimensions 1, 2, 3, 5, 7 (and 0 with
  `empty`; with `large`, also rank 1-2 with 8 to 64 and rank 1 with 1031 or 4099); with `views`, given Fortran-ordered or as transposed, strided,
  reversed or offset views; with `scalars`, Python ints and floats and numpy
  scalars (with `specials` too, Python ints at and past every integer dtype's limits);
- values: standard normal floats and small integers; with `specials`, also
  NaN, +-inf, -0.0, huge and subnormal floats and integers at their limits;
- steps: elementwise math, wrapping integer arithmetic, comparisons, logic,
  casts, Python and numpy scalar constants, constant rows, reductions,
  matmul, layout changes, array methods (supported or not), and one value
  read through several views of itself (``x + x.T``, ``x @ x.T``,
  ``x * x[..., ::-1]``, ...).
"""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import kiln
from kiln.dialects.types import SUPPORTED_DTYPES

# Every numpy dtype a program may use once kiln supports it; kiln's own list
# decides which are drawn today.
_CANDIDATE_DTYPES = (
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
)
DTYPES = tuple(np.dtype(d) for d in _CANDIDATE_DTYPES if np.dtype(d) in SUPPORTED_DTYPES)
FLOATS = tuple(d for d in DTYPES if d.kind == "f")
DIMS = (1, 2, 3, 5, 7)
# Past the vector width (tails of vectorized loops, partial tiles) and long float sums.
LARGE_DIMS = (8, 13, 17, 31, 64)
LONG = (1031, 4099)

# Scalar constants: Python (weak) and numpy (strong) ones, signed zeros and
# integer limits included; numpy rejects the ones that do not fit.
CONSTANTS = (
    0,
    1,
    -1,
    2,
    3,
    2**31 - 1,
    -(2**31),
    2**63 - 1,
    0.0,
    -0.0,
    1.0,
    0.5,
    -1.5,
    2.0,
    1e300,
    float("inf"),
    float("nan"),
    np.float32(0.5),
    np.float32(-0.0),
    np.float64(2.0),
    np.float64(-0.0),
    np.int32(3),
    np.int64(-2),
    np.bool_(True),
)
ROW_VALUES = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0)


def _positive_zeros(x):
    """`x` with -0.0 made +0.0 (and a check that kiln does not fold x + 0.0 to x). numpy's
    max and min reductions return the zero sign of a left-to-right fold of maximum/minimum
    (np.max([0.0, -0.0]) is -0.0); kiln's give IEEE 754's answer whatever the order (+0.0 for
    max, -0.0 for min), a chosen difference that would otherwise end every run meeting it."""
    return x + 0.0 if _dtype_of(x).kind == "f" else x


def _astype(x, dtype):
    return x.astype(dtype) if hasattr(x, "astype") else np.asarray(x).astype(dtype)


def _cast(x, dtype):
    """`x` cast to `dtype`. Floats going to an integer type are first replaced by 0 where
    they are NaN or out of range: numpy leaves those casts undefined."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu" or _dtype_of(x).kind != "f":
        return _astype(x, dtype)
    info = np.iinfo(dtype)
    low, high = max(float(info.min), -1e9), min(float(info.max), 1e9)
    return _astype(np.where((x > low) & (x < high), x, 0), dtype)


@dataclass(frozen=True)
class Op:
    """One step: `fn(*operands, **params)`, with `draw_params(draw, shape)` for its parameters."""

    fn: object
    arity: int = 1
    min_rank: int = 0  # numpy scalars take .T, x[::-1] and axis=0 where 0-d arrays do not
    smooth: bool = False  # differentiable everywhere: finite differences are a fair reference
    draw_params: object = None


def _axis_params(draw, shape):
    axis = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1))) if shape else None
    return {"axis": axis, "keepdims": draw(st.booleans())}


def _reshape_params(draw, shape):
    size = int(np.prod(shape))
    return {"shape": draw(st.sampled_from([(size,), (1, size), (size, 1), (-1,), tuple(shape[::-1])]))}


def _slice_params(draw, shape):
    n = shape[0] if shape else 0
    return {
        "start": draw(st.one_of(st.none(), st.integers(-n - 1, n))),
        "stop": draw(st.one_of(st.none(), st.integers(-n - 1, n))),
        "step": draw(st.sampled_from([1, 2, 3, -1, -2])),
    }


def _perm_params(draw, shape):
    return {"axes": tuple(draw(st.permutations(range(len(shape)))))}


def _constant_params(draw, shape):
    return {"c": draw(st.sampled_from(CONSTANTS))}


def _row_params(draw, shape):
    n = min(shape[-1] if shape else 1, 8)
    return {
        "row": tuple(draw(st.lists(st.sampled_from(ROW_VALUES), min_size=n, max_size=n))),
        "dtype": draw(st.sampled_from(DTYPES)).name,
    }


def _row(x, row, dtype):
    """A constant row as long as `x`'s last axis: `row` repeated."""
    return np.resize(np.array(row, dtype=dtype), np.shape(x)[-1:] or (1,))


def _cast_params(draw, shape):
    return {"dtype": draw(st.sampled_from(DTYPES)).name}


def _index_params(draw, shape):
    return {"k": draw(st.integers(-shape[0], shape[0] - 1)) if shape and shape[0] else 0}


# Array methods, supported or not: kiln must compute them or raise UnsupportedError.
METHODS = (
    "prod",
    "cumsum",
    "cumprod",
    "argmax",
    "argmin",
    "any",
    "all",
    "round",
    "flatten",
    "copy",
    "trace",
    "diagonal",
    "conj",
    "std",
    "argsort",
)


def _method_params(draw, shape):
    return {"method": draw(st.sampled_from(METHODS))}


def _broadcast_params(draw, shape):
    return {"lead": draw(st.sampled_from([1, 2, 3]))}


OPS = {
    # elementwise math (numpy picks the float type for integer and bool operands)
    "negative": Op(np.negative, smooth=True),
    "abs": Op(np.abs),
    "square": Op(lambda x: x * x, smooth=True),
    "tanh": Op(np.tanh, smooth=True),
    "sin": Op(np.sin, smooth=True),
    "cos": Op(np.cos, smooth=True),
    "exp": Op(np.exp),
    "sqrt_abs": Op(lambda x: np.sqrt(np.abs(x))),
    "exp_tanh": Op(lambda x: np.exp(np.tanh(x)), smooth=True),
    "log1p_abs": Op(lambda x: np.log(1.0 + np.abs(x))),
    "relu": Op(lambda x: np.maximum(x, 0.0)),
    "sigmoid": Op(kiln.sigmoid, smooth=True),
    "softmax": Op(kiln.softmax, min_rank=1, smooth=True),
    "logsumexp": Op(lambda x: kiln.logsumexp(x, axis=-1), min_rank=1, smooth=True),
    "clip": Op(lambda x: np.clip(x, -0.5, 2)),
    "pow_abs": Op(lambda x: np.abs(x) ** 1.5),
    "power_2": Op(lambda x: x**2, smooth=True),
    "power_0": Op(lambda x: x * (x * 0) ** 0, smooth=True),  # 0 ** 0: its slope is 0, not 0 * 0 ** -1
    "reciprocal": Op(np.reciprocal),
    "logical_not": Op(np.logical_not),
    "invert": Op(np.invert),
    "floor": Op(np.floor),
    "rint": Op(np.rint),
    "sign": Op(np.sign),
    "signbit": Op(np.signbit),
    "isfinite": Op(np.isfinite),
    "arctan": Op(np.arctan, smooth=True),
    "arcsinh": Op(np.arcsinh, smooth=True),
    "cbrt": Op(np.cbrt),
    "expm1": Op(np.expm1),
    "log2_abs": Op(lambda x: np.log2(np.abs(x))),
    "nan_to_num": Op(np.nan_to_num),
    "cast": Op(_cast, draw_params=_cast_params),
    "method": Op(lambda x, method: getattr(x, method)(), draw_params=_method_params),
    # with a scalar constant: Python scalars are weak, numpy scalars strong
    "add_c": Op(lambda x, c: x + c, draw_params=_constant_params),
    "mul_c": Op(lambda x, c: x * c, draw_params=_constant_params),
    "rsub_c": Op(lambda x, c: c - x, draw_params=_constant_params),
    "maximum_c": Op(lambda x, c: np.maximum(x, c), draw_params=_constant_params),
    "less_c": Op(lambda x, c: np.less(x, c), draw_params=_constant_params),
    "affine": Op(
        lambda x, c: x * c + 0.5,
        smooth=True,
        draw_params=lambda draw, shape: {"c": draw(st.sampled_from([-1.5, 0.5, 2.0]))},
    ),
    # with a captured constant row along the last axis (distinct values: not a splat)
    "add_row": Op(lambda x, row, dtype: x + _row(x, row, dtype), draw_params=_row_params),
    "mul_row": Op(lambda x, row, dtype: x * _row(x, row, dtype), draw_params=_row_params),
    # binary, with numpy's broadcasting and promotion; integers wrap around
    "add": Op(np.add, 2, smooth=True),
    "subtract": Op(np.subtract, 2, smooth=True),
    "multiply": Op(np.multiply, 2, smooth=True),
    "maximum": Op(np.maximum, 2),
    "minimum": Op(np.minimum, 2),
    "divide": Op(np.true_divide, 2),
    "safe_divide": Op(lambda x, y: x / (1.0 + np.abs(y)), 2),
    "where_greater": Op(lambda x, y: np.where(x > y, x, y), 2),
    "greater": Op(np.greater, 2),
    "less_equal": Op(np.less_equal, 2),
    "equal": Op(np.equal, 2),
    "not_equal": Op(np.not_equal, 2),
    "logical_and": Op(np.logical_and, 2),
    "logical_or": Op(np.logical_or, 2),
    "logical_xor": Op(np.logical_xor, 2),
    "bitwise_and": Op(np.bitwise_and, 2),
    "bitwise_or": Op(np.bitwise_or, 2),
    "bitwise_xor": Op(np.bitwise_xor, 2),
    "floor_divide": Op(np.floor_divide, 2),
    "remainder": Op(np.remainder, 2),
    "fmod": Op(np.fmod, 2),
    "divmod_sum": Op(lambda x, y: np.add(*np.divmod(x, y)), 2),
    "left_shift": Op(np.left_shift, 2),
    "right_shift": Op(np.right_shift, 2),
    "arctan2": Op(np.arctan2, 2),
    "hypot": Op(np.hypot, 2),
    "copysign": Op(np.copysign, 2),
    "fmax": Op(np.fmax, 2),
    "fmin": Op(np.fmin, 2),
    "logaddexp": Op(np.logaddexp, 2),
    "heaviside": Op(np.heaviside, 2),
    "where_nonzero": Op(lambda x, y: np.where(y, x, 0), 2),
    "concatenate": Op(lambda x, y: np.concatenate([x, y], axis=-1), 2, smooth=True),
    "stack": Op(lambda x, y: np.stack([x, y], axis=-1), 2, smooth=True),
    "matmul": Op(np.matmul, 2, smooth=True),
    # reductions
    "sum": Op(np.sum, smooth=True, draw_params=_axis_params),
    "mean": Op(np.mean, smooth=True, draw_params=_axis_params),
    "var": Op(np.var, draw_params=_axis_params),
    "std": Op(np.std, draw_params=_axis_params),
    "max": Op(lambda x, **kw: _positive_zeros(np.max(x, **kw)), draw_params=_axis_params),
    "min": Op(lambda x, **kw: _positive_zeros(np.min(x, **kw)), draw_params=_axis_params),
    # layout
    "transpose": Op(np.transpose, smooth=True),
    "permute": Op(np.transpose, smooth=True, draw_params=_perm_params),
    "reshape": Op(np.reshape, smooth=True, draw_params=_reshape_params),
    "slice": Op(lambda x, start, stop, step: x[start:stop:step], min_rank=1, smooth=True, draw_params=_slice_params),
    "index": Op(lambda x, k: x[k], min_rank=1, smooth=True, draw_params=_index_params),
    "expand": Op(lambda x: x[..., None], smooth=True),
    "squeeze": Op(np.squeeze, smooth=True),
    "swapaxes": Op(lambda x: np.swapaxes(x, 0, -1), min_rank=1, smooth=True),
    "moveaxis": Op(lambda x: np.moveaxis(x, 0, -1), min_rank=1, smooth=True),
    "ravel": Op(np.ravel, smooth=True),
    "broadcast": Op(
        lambda x, lead: np.broadcast_to(x, (lead,) + np.shape(x)), smooth=True, draw_params=_broadcast_params
    ),
    # one value read through several views of itself
    "plus_transpose": Op(lambda x: x + x.T, min_rank=1, smooth=True),
    "plus_reversed": Op(lambda x: x + x[::-1], min_rank=1, smooth=True),
    "times_flipped": Op(lambda x: x * x[..., ::-1], min_rank=1, smooth=True),
    "minus_row_mean": Op(lambda x: x - x.mean(axis=-1, keepdims=True), min_rank=1, smooth=True),
    "matmul_self_t": Op(lambda x: x @ x.T, min_rank=1, smooth=True),
    "t_matmul_self": Op(lambda x: x.T @ x, min_rank=1, smooth=True),
    "sum_with_t": Op(lambda x: x.sum(axis=0) + x.T.sum(axis=-1), min_rank=1, smooth=True),
    "concat_reversed": Op(lambda x: np.concatenate([x, x[::-1]]), min_rank=1, smooth=True),
    "plus_reshaped": Op(lambda x: x + np.reshape(x, np.shape(x)[::-1]), min_rank=1, smooth=True),
}

# Operations kiln does not compile, by the dtype kinds of their operands and
# result ('f' float, 'i' signed, 'u' unsigned, 'b' bool): delete an entry when
# kiln learns the operation, and the fuzzer starts drawing it. Every operation is drawn
# today, on every dtype numpy allows it.
NOT_YET: dict = {}


@dataclass
class Input:
    """How one argument is made: an array (`form` "array"), a Python scalar
    ("python") or a numpy scalar ("numpy"); its memory `layout` and `fill`."""

    shape: tuple
    dtype: np.dtype
    form: str = "array"
    layout: str = "C"  # C, F, transposed, strided, reversed, offset
    fill: str = "normal"  # normal, special (floats: NaN, inf, -0.0, huge, subnormal; integers: limits)

    def __str__(self) -> str:
        if self.form != "array":
            return f"{self.form} {self.dtype.name} scalar ({self.fill})"
        return f"{self.shape} {self.dtype.name} {self.layout} ({self.fill})"


@dataclass
class Program:
    inputs: list
    smooth: bool
    steps: list = field(default_factory=list)  # (name, operand indices, parameters)
    protos: list = field(default_factory=list)  # every value as numpy computes it on stand-ins, inputs first

    @property
    def input_shapes(self) -> list:
        return [i.shape for i in self.inputs]

    @property
    def dtype(self) -> np.dtype:
        """The first input's dtype (the program's main one)."""
        return self.inputs[0].dtype

    def describe(self) -> str:
        lines = [f"  v{k}: {i}" for k, i in enumerate(self.inputs)]
        for k, (name, operands, params) in enumerate(self.steps):
            target = len(self.inputs) + k
            args = [f"v{i}" for i in operands] + [f"{a}={b!r}" for a, b in params.items()]
            proto = self.protos[target]
            lines.append(f"  v{target} = {name}({', '.join(args)})  # {np.shape(proto)} {_dtype_of(proto).name}")
        return "inputs:\n" + "\n".join(lines)


def _dtype_of(value) -> np.dtype:
    if hasattr(value, "dtype"):
        return np.dtype(value.dtype)
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        return np.dtype({bool: np.bool_, int: np.int64, float: np.float64}[type(value)])
    return np.asarray(value).dtype


def run(program: Program, inputs, rounding=None):
    """Evaluate the program on arrays (numpy) or tracers (kiln); returns every value no step
    consumed (the last step's value at least, so always a tuple). `rounding`, if given, is
    applied to each step's value (numpy only)."""
    values = list(inputs)
    for name, operands, params in program.steps:
        value = OPS[name].fn(*(values[i] for i in operands), **params)
        value = value if rounding is None else rounding(value)
        if type(value) is int and not -(2**63) <= value < 2**63:
            # Python ints do not wrap; numpy rejects such a program, so it is not one to compare.
            raise OverflowError(f"Python int {value} is outside int64")
        values.append(value)
    used = {i for _, operands, _ in program.steps for i in operands}
    return tuple(values[i] for i in range(len(program.inputs), len(values)) if i not in used)


def program_of(inputs: list, steps: list, smooth: bool = False) -> Program:
    """A program written out by hand: `steps` are (op name, operand indices, parameters)."""
    program = Program(list(inputs), smooth, [], [_stand_in(i) for i in inputs])
    for name, operands, params in steps:
        out = _try_step(program, name, list(operands), dict(params))
        if out is None:
            raise ValueError(
                f"step {name}{tuple(operands)} {params} is not one the fuzzer draws "
                "(numpy rejects it, or kiln does not support it yet)"
            )
        program.steps.append((name, list(operands), dict(params)))
        program.protos.append(out)
    return program


def _stand_in(spec: Input):
    if spec.form == "python":
        return {"f": 1.0, "i": 1}[spec.dtype.kind]
    one = np.ones(spec.shape, spec.dtype)
    return spec.dtype.type(1) if spec.form == "numpy" else one


def _quietly(fn, *args, **kwargs):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _try_step(program: Program, name: str, operands: list, params: dict):
    """numpy's result of the step on stand-ins, or None if numpy rejects it or kiln lacks the dtype."""
    operand_values = [program.protos[i] for i in operands]
    if np.ndim(operand_values[0]) < OPS[name].min_rank:
        return None
    try:
        out = _quietly(OPS[name].fn, *operand_values, **params)
    except (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError, AttributeError):
        return None
    if isinstance(out, bool) or _dtype_of(out) not in DTYPES or np.ndim(out) > 4 or np.size(out) > 1 << 14:
        return None
    if any(_kind(v) in NOT_YET.get(name, "") for v in operand_values + [out]):
        return None
    return out


def _kind(value) -> str:
    return _dtype_of(value).kind


def _allowed(program: Program) -> list:
    return sorted(name for name, op in OPS.items() if not program.smooth or op.smooth)


def _draw_step(draw, program: Program) -> bool:
    """Draw one step that numpy accepts; False if the drawn operand admits none."""
    protos = program.protos
    i = draw(st.integers(0, len(protos) - 1))
    names = _allowed(program)
    for _ in range(8):
        name = draw(st.sampled_from(names))
        op = OPS[name]
        operands = [i]
        if op.arity == 2:
            partners = [j for j in range(len(protos)) if _try_step(program, name, [i, j], {}) is not None]
            if not partners:
                continue
            operands.append(draw(st.sampled_from(partners)))
        params = op.draw_params(draw, np.shape(protos[i])) if op.draw_params else {}
        out = _try_step(program, name, operands, params)
        if out is not None:
            program.steps.append((name, operands, params))
            protos.append(out)
            return True
    return False


@st.composite
def programs(
    draw,
    max_steps: int = 8,
    dtypes=FLOATS,
    smooth: bool = False,
    mixed: bool = False,
    views: bool = False,
    scalars: bool = False,
    specials: bool = False,
    empty: bool = False,
    large: bool = False,
):
    """Random programs over inputs of `dtypes` (see the module docstring for the switches);
    `smooth` ones use only operations differentiable everywhere."""
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    dims = DIMS + (0,) if empty and draw(st.integers(0, 3)) == 0 else DIMS
    size = draw(st.sampled_from(["small", "small", "large", "long"] if large else ["small"]))
    if size == "large":
        base = tuple(draw(st.lists(st.sampled_from(LARGE_DIMS + dims), min_size=1, max_size=2)))
    elif size == "long":
        base = (draw(st.sampled_from(LONG)),)
    else:
        base = tuple(draw(st.lists(st.sampled_from(dims), min_size=0, max_size=3)))
    shapes = [base]
    for _ in range(draw(st.integers(0, 2))):  # more inputs, broadcastable against the first
        keep = draw(st.integers(0, len(base)))
        shapes.append(tuple(d if draw(st.booleans()) else 1 for d in base[len(base) - keep :]))
    inputs = []
    for shape in shapes:
        spec = Input(shape, dtype)
        if mixed and inputs and draw(st.integers(0, 2)) == 0:
            spec.dtype = np.dtype(draw(st.sampled_from(DTYPES)))
        if scalars and not shape and draw(st.booleans()):
            spec.form = draw(st.sampled_from(["python", "numpy"] if spec.dtype.kind in "fi" else ["numpy"]))
        elif views and shape:
            spec.layout = draw(st.sampled_from(["C", "F", "transposed", "strided", "reversed", "offset"]))
        if specials and spec.dtype.kind != "b" and draw(st.booleans()):
            spec.fill = "special"
        inputs.append(spec)
    program = Program(inputs, smooth, [], [_stand_in(i) for i in inputs])
    for _ in range(draw(st.integers(1, max_steps))):
        _draw_step(draw, program)
    if not program.steps:
        program.steps.append(("add", [0, 0], {}))
        program.protos.append(_try_step(program, "add", [0, 0], {}))
    return program


# -- inputs ---------------------------------------------------------------------------
def _special_values(dtype: np.dtype) -> list:
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return [
            np.nan,
            np.inf,
            -np.inf,
            0.0,
            -0.0,
            float(info.max),
            -float(info.max),
            float(np.sqrt(info.max)) * 2,
            float(info.smallest_subnormal),
            -float(info.tiny),
            1.0,
            -1.0,
        ]
    info = np.iinfo(dtype)
    return [info.min, info.max, info.min + 1, info.max - 1, 0, 1] + ([-1] if info.min else [])


def _values(spec: Input, rng) -> np.ndarray:
    kind = spec.dtype.kind
    if kind == "b":
        return rng.random(spec.shape) < 0.5
    if kind == "f":
        values = rng.standard_normal(spec.shape)
    else:
        info = np.iinfo(spec.dtype)
        values = rng.integers(max(info.min, -20), min(info.max, 20), spec.shape, endpoint=True)
    values = values.astype(spec.dtype)
    if spec.fill == "special":
        # every special value once where there is room (in random places), then half the rest
        pool = rng.permutation(np.array(_special_values(spec.dtype), dtype=spec.dtype))
        flat = values.reshape(-1)
        mask = rng.random(flat.size) < 0.5
        flat[mask] = pool[rng.integers(0, len(pool), int(mask.sum()))]
        places = rng.permutation(flat.size)[: len(pool)]
        flat[places] = pool[: len(places)]
        values = flat.reshape(spec.shape)
    return np.asarray(values, dtype=spec.dtype)


def _laid_out(values: np.ndarray, layout: str) -> np.ndarray:
    """The same values in the given memory layout; gaps in strided views hold a sentinel
    that shows up if kiln reads them."""
    rank = values.ndim
    if rank == 0:  # np.ascontiguousarray would make it 1-d
        return np.array(values)
    sentinel = np.array(99, values.dtype) if values.dtype.kind != "f" else np.array(np.nan, values.dtype)
    if layout == "F":
        return np.asfortranarray(values)
    if layout == "transposed":
        return np.ascontiguousarray(values.T).T
    if layout == "reversed":
        flip = (slice(None, None, -1),) * rank
        return np.ascontiguousarray(values[flip])[flip]
    if layout == "strided":
        big = np.full(tuple(2 * d for d in values.shape), sentinel)
        every_other = (slice(None, None, 2),) * rank
        big[every_other] = values
        return big[every_other]
    if layout == "offset":
        big = np.full((values.shape[0] + 1,) + values.shape[1:], sentinel)
        big[1:] = values
        return big[1:]
    return np.ascontiguousarray(values)


# Python ints at and just past the limits of every integer dtype: numpy compares them with
# any integer array exactly, and refuses arithmetic with one the array cannot hold (NEP 50).
_AWKWARD_INTS = [-1, 127, 128, -129, 255, 256, 2**15, 65536, 2**31, -(2**31) - 1, 2**32, 2**63 - 1, -(2**63)]


def inputs_for(program: Program, seed: int) -> list:
    """The program's arguments for one seed: arrays in their layouts, or scalars."""
    rng = np.random.default_rng(seed)
    inputs = []
    for spec in program.inputs:
        values = _values(spec, rng)
        if spec.form == "python":
            if spec.dtype.kind == "i" and spec.fill == "special":  # at and past the narrow dtypes' limits
                inputs.append(int(rng.choice(_AWKWARD_INTS)))
            else:
                inputs.append(values.item() if spec.dtype.kind == "f" else int(np.clip(values, -5, 5)))
        elif spec.form == "numpy":
            inputs.append(spec.dtype.type(values.item()))
        else:
            inputs.append(_laid_out(values, spec.layout))
    return inputs


# -- checks ---------------------------------------------------------------------------
def tolerance(dtype) -> float:
    """Relative error allowed in a float result: kiln may fuse, reorder sums and use its own
    math functions, so it rounds differently from numpy (several ulps, more for float32
    sums and transcendental functions); exact (0) for integers and bools."""
    return {"float16": 2e-3, "float32": 2e-4, "float64": 1e-9}.get(np.dtype(dtype).name, 0.0)


def _results(value) -> list:
    return [np.asarray(v) for v in (value if isinstance(value, tuple) else (value,))]


def _reference(program: Program, inputs) -> list:
    return _results(_quietly(run, program, inputs))


def _nudged(x, rng):
    """`x` with every float moved by a random relative `tolerance` of its dtype."""
    dtype = _dtype_of(x)
    if dtype.kind != "f":
        return x
    moved = (np.asarray(x, np.float64) * (1 + tolerance(dtype) * rng.uniform(-1, 1, np.shape(x)))).astype(dtype)
    if type(x) is float:
        return float(moved)
    return dtype.type(moved) if isinstance(x, np.generic) else moved


def _spread(program: Program, inputs, want: list, seed: int):
    """How far numpy's own results move when every float input and every float step's value
    moves by the tolerance: a correct compiler's rounding, step by step, moves them as far
    (values computed from integers included). Per result: the largest move of each element
    (float) and where the results are unstable (NaN, inf, zero sign, bool or integer flips)."""
    rng = np.random.default_rng(seed + 7)
    spread = [np.zeros(w.shape) for w in want]
    unstable = [np.zeros(w.shape, bool) for w in want]
    for _ in range(3):
        try:
            moved = _results(run(program, [_nudged(x, rng) for x in inputs], lambda v: _nudged(v, rng)))
        except (ArithmeticError, ValueError, TypeError):
            return spread, [np.ones(w.shape, bool) for w in want]
        for k, (m, w) in enumerate(zip(moved, want)):
            if w.dtype.kind == "f":
                finite = np.isfinite(w) & np.isfinite(m)
                spread[k] = np.maximum(spread[k], np.where(finite, np.abs(m.astype(np.float64) - w), 0))
                unstable[k] |= ~finite & ~((m == w) | (np.isnan(m) & np.isnan(w)))
                unstable[k] |= (w == 0) & ((m != 0) | (np.signbit(m) != np.signbit(w)))
            else:
                unstable[k] |= m != w
    return spread, unstable


def compare(got, want: list, spread: list, unstable: list, what: str) -> None:
    """Assert kiln's results equal numpy's: the same number of results, each with numpy's
    dtype and shape; integers and bools exactly; floats with NaN where numpy has NaN, the
    same infinities and zero signs, and otherwise within tolerance (plus numpy's own spread
    under perturbed inputs). Elements whose value numpy itself cannot pin down are skipped."""
    with np.errstate(invalid="ignore", over="ignore"):
        _compare(_results(got), want, spread, unstable, what)


def _compare(got: list, want: list, spread: list, unstable: list, what: str) -> None:
    assert len(got) == len(want), f"{len(got)} results instead of numpy's {len(want)} {what}"
    for k, (g, w) in enumerate(zip(got, want)):
        where = f"result {k} {what}"
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{where}: kiln gives {g.shape} {g.dtype}, numpy {w.shape} {w.dtype}"
        )
        ok = g == w
        if w.dtype.kind == "f":
            tol = tolerance(w.dtype)
            both_finite = np.isfinite(g) & np.isfinite(w)
            error = np.abs(g.astype(np.float64) - w)
            ok = np.where(both_finite, error <= tol * np.abs(w) + 4 * spread[k] + tol * 1e-6, ok)
            ok |= np.isnan(g) & np.isnan(w)
            ok &= (w != 0) | (g != 0) | (np.signbit(g) == np.signbit(w))
        ok |= unstable[k]
        if not np.all(ok):
            bad = tuple(int(i) for i in np.argwhere(~ok)[0]) if w.ndim else ()
            raise AssertionError(
                f"{where}: {int(np.sum(~ok))} of {w.size} elements differ, first at {bad}: "
                f"kiln {g[bad]!r}, numpy {w[bad]!r}\nkiln:  {g!r}\nnumpy: {w!r}"
            )


def _show(inputs) -> str:
    return "\n".join(
        f"  v{k} = {np.array2string(np.asarray(x), separator=', ', threshold=64)}" for k, x in enumerate(inputs)
    )


def _snapshot(inputs) -> list:
    return [np.array(x, copy=True) for x in inputs]


def reference(program: Program, inputs):
    """numpy's results of `program` on `inputs`, or None where numpy rejects the program on
    these values or gives a dtype kiln lacks (the program is then invalid, not a finding)."""
    try:
        want = _reference(program, inputs)
    except (ArithmeticError, ValueError, TypeError, IndexError):
        return None
    return None if any(w.dtype not in DTYPES for w in want) else want


def _out_of_bounds(program: Program, inputs) -> bool:
    """Whether numpy refuses the program for a Python int its array's dtype cannot hold."""
    try:
        _reference(program, inputs)
    except OverflowError as exc:
        return "out of bounds" in str(exc)
    except (ArithmeticError, ValueError, TypeError, IndexError):
        pass
    return False


def check(program: Program, seed: int, target: str = "cpu") -> str:
    """Compile the program and compare it with numpy. Returns "checked"; "overflow" when
    numpy and kiln both raise OverflowError for a Python int out of its array's dtype;
    "invalid" when numpy itself rejects the program on these inputs; "unsupported: <message>" when kiln
    raises UnsupportedError. Any other exception from kiln, a wrong result, or an input
    written to is an AssertionError that describes the program."""
    inputs = inputs_for(program, seed)
    want = reference(program, inputs)
    what = f"for seed {seed} on target {target}:\n{program.describe()}\n{_show(inputs)}"
    compiled = kiln.compile(lambda *xs: run(program, xs), target=target)
    if want is None and _out_of_bounds(program, inputs):
        try:
            _quietly(compiled, *inputs)
        except OverflowError:
            return "overflow"
        raise AssertionError(f"numpy raises OverflowError for a Python int out of bounds, kiln does not {what}")
    if want is None:
        return "invalid"
    before = _snapshot(inputs)
    # A second call on C-ordered copies: another layout of the same values, and the
    # first call's results must not change when the compiled function runs again.
    copies = [np.array(x) if isinstance(x, np.ndarray) else x for x in inputs]
    try:
        got = _quietly(compiled, *inputs)
        got_again = _quietly(compiled, *copies)
    except kiln.UnsupportedError as exc:
        return f"unsupported: {exc.message}"
    except Exception as exc:
        raise AssertionError(f"kiln raised {type(exc).__name__} on a program numpy runs {what}\n{exc}") from exc
    for k, (b, x) in enumerate(zip(before, inputs)):
        assert np.array_equal(b, np.asarray(x), equal_nan=b.dtype.kind == "f"), f"kiln wrote into input {k} {what}"
    spread = _quietly(_spread, program, inputs, want, seed)
    compare(got, want, *spread, what)
    compare(got_again, want, *spread, f"in a second call on C-ordered copies {what}")
    outs, where = _outs_for(want, copies, np.random.default_rng(seed + 3))
    try:
        _quietly(compiled, *copies, out=tuple(outs))
    except kiln.UnsupportedError as exc:
        return f"unsupported: {exc.message}"
    except Exception as exc:
        raise AssertionError(f"kiln raised {type(exc).__name__} with out= {where} {what}\n{exc}") from exc
    compare(tuple(outs), want, *spread, f"written to out= {where} {what}")
    return "checked"


def _outs_for(want: list, inputs: list, rng):
    """Arrays for out=, one per result: in a random layout, or (where an input has the
    result's shape and dtype) that input itself, computed in place as numpy allows."""
    outs, where = [], []
    for w in want:
        same = [
            x
            for x in inputs
            if isinstance(x, np.ndarray) and x.shape == w.shape and x.dtype == w.dtype and not any(x is o for o in outs)
        ]
        if same and rng.random() < 0.5:
            outs.append(same[0])
            where.append("an input")
        else:
            layout = rng.choice(["C", "F", "transposed", "strided", "reversed", "offset"]) if w.ndim else "C"
            outs.append(_laid_out(np.zeros(w.shape, w.dtype), layout))
            where.append(str(layout))
    return outs, f"({', '.join(where)})"


def check_concurrently(pairs: list, target: str = "cpu") -> list:
    """`check` of several (program, seed) pairs at once, one thread each (tracing,
    compiling and calling from threads); returns their outcomes."""
    barrier = threading.Barrier(len(pairs))

    def one(pair):
        barrier.wait()  # start together, so that the traces overlap
        return check(*pair, target)

    with ThreadPoolExecutor(max_workers=len(pairs)) as pool:
        return list(pool.map(one, pairs))


def check_gradient(program: Program, seed: int) -> str:
    """kiln.grad of a weighted sum of the program's results, called on the inputs in their
    layouts, against float64 central differences of the numpy program."""
    inputs = inputs_for(program, seed)
    rng = np.random.default_rng(seed + 1)
    try:
        weights = [rng.standard_normal(w.shape) for w in _reference(program, inputs)]
    except (ArithmeticError, ValueError, TypeError, IndexError):
        return "invalid"

    def loss(*xs):
        outs = run(program, xs)
        return sum((o * w).sum() for o, w in zip(outs if isinstance(outs, tuple) else (outs,), weights))

    argnums = tuple(range(len(inputs)))
    what = f"for seed {seed}:\n{program.describe()}\n{_show(inputs)}"
    try:
        grads = _quietly(kiln.compile(kiln.grad(loss, argnums=argnums)), *inputs)
    except kiln.UnsupportedError as exc:
        return f"unsupported: {exc.message}"
    except Exception as exc:
        raise AssertionError(f"kiln.grad raised {type(exc).__name__} on a program numpy runs {what}\n{exc}") from exc
    eps = 1e-6
    for k, (x, g) in enumerate(zip(inputs, grads)):
        base = np.array(x, dtype=np.float64)
        numeric = np.zeros(base.shape)
        for index in np.ndindex(base.shape):

            def at(delta):
                moved = base.copy()
                moved[index] += delta
                args = list(inputs)
                args[k] = moved
                return float(_quietly(loss, *args))

            numeric[index] = (at(eps) - at(-eps)) / (2 * eps)
        g = np.asarray(g)
        assert g.shape == base.shape and g.dtype == np.float64, (
            f"gradient {k} is {g.shape} {g.dtype}, want {base.shape} float64 {what}"
        )
        bad = np.abs(g - numeric) > 1e-6 + 1e-5 * np.abs(numeric)
        assert not np.any(bad), f"gradient {k} differs {what}\nkiln:    {g!r}\nnumeric: {numeric!r}"
    return "checked"
