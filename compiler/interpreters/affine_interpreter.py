"""Reference interpreter for the ``affine`` level (and the scheduled IR): runs loop
nests one iteration at a time in Python, with numpy scalars so float32 rounds
like float32.

Slow by design and meant for small shapes: it is the oracle that lets every
stage after every pass be executed (``kiln.bisect``), independent of LLVM.
Out-of-bounds loads and stores raise OutOfBoundsError naming the op instead of
reading a neighbour's memory.
"""

from __future__ import annotations

import functools

import numpy as np

from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import cf as CF
from kiln.dialects import func as F
from kiln.dialects import gpu as G
from kiln.dialects import math as M
from kiln.dialects import memref as MR
from kiln.dialects import vector as V
from kiln.dialects.diagnostics import KilnError
from kiln.dialects.traits import ALLOCATION, MEMORY_READ, MEMORY_WRITE
from kiln.dialects.types import VectorType, index
from kiln.errors import OutOfBoundsError


def run_affine(module, args, result_dtypes=None) -> list:
    """Run the module's function on numpy arrays (its inputs); returns the outputs.

    The function's arguments are its inputs followed by one buffer per result, as
    in the native calling convention. The loop level's integers are signless: a uint8
    result is an i8 buffer here, returned as int8 unless `result_dtypes` (the function's
    numpy result dtypes) says how to read its bits."""
    function = module.body.ops[-1]
    globals_ = {op.sym_name: op.initial_value for op in module.body.ops if isinstance(op, MR.GlobalOp)}
    functions = {op.sym_name: op for op in module.body.ops if isinstance(op, F.FuncOp)}
    arguments = function.arguments
    outputs = [np.zeros(a.type.shape, a.type.dtype) for a in arguments[len(args) :]]
    env = {v: np.array(a, dtype=v.type.dtype) for v, a in zip(arguments, list(args))}
    env.update(zip(arguments[len(args) :], outputs))
    with np.errstate(all="ignore"):  # compiled code does not warn on inf/nan; neither does its oracle
        _Runner(env, globals_, functions).block(function.body.ops)
    if result_dtypes is not None:
        outputs = [out.view(dtype) for out, dtype in zip(outputs, result_dtypes)]
    return outputs


class _Runner:
    def __init__(self, env, globals_, functions=None):
        self.env = env
        self.globals = globals_
        self.functions = functions or {}  # the module's, by name: what func.call runs

    def block(self, ops):
        """Run ops in order; returns the operands of the final affine.yield, if any."""
        for op in ops:
            if isinstance(op, A.YieldOp):
                return [self.env[v] for v in op.operands]
            if isinstance(op, F.ReturnOp):
                return None
            self.run(op)
        return None

    def run(self, op):
        env = self.env
        if isinstance(op, A.ForOp):
            if op.constant_bounds:
                upper = op.upper
            else:
                upper = min(op.upper_map.evaluate([int(env[v]) for v in op.bound_operands]))
            carried = [env[v] for v in op.inits]
            for i in range(op.lower, upper, op.step):
                env[op.induction_variable] = i
                env.update(zip(op.body.args[1:], carried))
                carried = self.block(op.body.ops) or []
            env.update(zip(op.results, carried))
        elif isinstance(op, A.ParallelOp):
            for i in range(op.upper):
                env[op.induction_variable] = i
                self.block(op.body.ops)
        elif isinstance(op, V.GatherOp):
            env[op.result] = self.gather(op)
        elif op.has_trait(MEMORY_READ):
            array, index = self.access(op)
            if isinstance(op, (A.VectorLoadOp, MR.VectorLoadOp)):
                env[op.result] = array[index[:-1]][index[-1] : index[-1] + op.result.type.lanes].copy()
            else:
                env[op.result] = array[index]
        elif op.has_trait(MEMORY_WRITE):
            array, index = self.access(op)
            value = env[op.operands[0]]
            if isinstance(op, A.VectorStoreOp):
                array[index[:-1]][index[-1] : index[-1] + len(value)] = value
            else:
                array[index] = value
        elif op.has_trait(ALLOCATION):
            env[op.result] = _fresh(op.result.type)
        elif isinstance(op, MR.ViewOp):
            env[op.result] = self.view(op)
        elif isinstance(op, MR.GetGlobalOp):
            env[op.result] = self.globals[op.attributes["name"]]
        elif isinstance(op, (MR.DeallocOp, G.BarrierOp)):  # one thread: a barrier waits for no one
            pass
        elif isinstance(op, A.ApplyOp):
            env[op.result] = op.map.evaluate([int(env[v]) for v in op.operands])[0]
        elif isinstance(op, AR.ConstantOp):
            env[op.result] = _typed(op.result.type, op.value)
        elif isinstance(op, F.CallOp):  # a kernel outlined into a private function: its arguments are the buffers
            callee = self.functions[op.attributes["callee"]]
            env.update(zip(callee.arguments, [env[v] for v in op.operands]))
            self.block(callee.body.ops)
        elif isinstance(op, CF.AssertOp):
            if not env[op.condition]:
                raise OutOfBoundsError(op.msg, op.loc)
        else:
            evaluate = _SCALAR.get(type(op))
            if evaluate is None:
                raise KilnError(f"the affine interpreter cannot run {op.name}")
            env[op.results[0]] = _typed(op.results[0].type, evaluate(op, *[env[v] for v in op.operands]))

    def view(self, op):
        """The typed buffer at a byte shift of the arena: a numpy view of the same bytes,
        so buffers the memory plan overlaps overwrite each other as in native code."""
        t = op.result.type
        shift, size = int(self.env[op.byte_shift]), t.size * t.dtype.itemsize
        raw = self.env[op.source].view(np.uint8)
        if not 0 <= shift <= shift + size <= raw.size:
            raise OutOfBoundsError(f"{op.name} of bytes [{shift}, {shift + size}) is outside {op.source.type}", op.loc)
        if shift % t.dtype.itemsize:
            raise OutOfBoundsError(f"{op.name} at byte {shift} is not aligned for {t.element}", op.loc)
        return raw[shift : shift + size].view(t.dtype).reshape(t.shape)

    def gather(self, op):
        """vector.gather: each lane where the mask holds from its row-major position, checked
        to lie inside the memref."""
        flat = self.env[op.base].reshape(-1)
        start = (
            int(np.ravel_multi_index([int(self.env[v]) for v in op.indices], op.base.type.shape)) if op.indices else 0
        )
        positions = start + np.asarray(self.env[op.offsets], np.int64)
        mask = np.asarray(self.env[op.mask], bool)
        bad = mask & ((positions < 0) | (positions >= flat.size))
        if bad.any():
            raise OutOfBoundsError(f"{op.name} of element {int(positions[bad][0])} is outside {op.base.type}", op.loc)
        result = np.array(self.env[op.pass_thru], copy=True)
        result[mask] = flat[positions[mask]]
        return result

    def access(self, op):
        array = self.env[op.memref]
        index = op.map.evaluate([int(self.env[v]) for v in op.indices])
        lanes = (
            op.result.type.lanes
            if isinstance(op, (A.VectorLoadOp, MR.VectorLoadOp))
            else len(self.env[op.operands[0]])
            if isinstance(op, A.VectorStoreOp)
            else 1
        )
        shape = array.shape
        if (
            len(index) != len(shape)
            or any(not 0 <= i < n for i, n in zip(index, shape))
            or (shape and index[-1] + lanes > shape[-1])
        ):
            raise OutOfBoundsError(f"{op.name} at {list(index)} is outside {op.memref.type}", op.loc)
        return array, tuple(index)


def _fresh(t):
    """A new buffer of memref type `t`, filled so that reading an element never written
    shows: NaN for floats; every byte 0xFF (NaN again, read as a float) for the arena."""
    if t.dtype.kind == "f":
        return np.full(t.shape, np.nan, t.dtype)
    if t.element.name == "i8":
        return np.full(t.shape, -1, t.dtype)
    return np.zeros(t.shape, t.dtype)


def _typed(t, value):
    """`value` as the IR type `t` says: a Python int for index, a numpy scalar, or a vector."""
    if getattr(t, "name", None) == "index":
        return int(value)
    if hasattr(t, "lanes"):
        dtype = np.int64 if t.element == index else t.dtype  # a vector of index: int64 lanes
        return np.broadcast_to(np.asarray(value).astype(dtype), (t.lanes,)).copy()
    return np.asarray(value).astype(t.dtype)[()]


def _index_cast(t, x):
    """arith.index_cast: an index is a Python int, a vector of index int64 lanes."""
    if t == index:
        return int(x)
    if isinstance(t, VectorType) and t.element == index:
        return np.asarray(x).astype(np.int64)
    return np.asarray(x).astype(t.dtype)


def _ipow(op, base, exponent):
    if np.any(np.asarray(exponent) < 0):
        raise ValueError("Integers to negative integer powers are not allowed.")
    return np.power(base, exponent)


_FLOAT_COMPARE = {
    "oeq": np.equal,
    "olt": np.less,
    "ole": np.less_equal,
    "ogt": np.greater,
    "oge": np.greater_equal,
    "une": np.not_equal,
}


def _unsigned(x) -> np.ndarray:
    """A signless integer's bits read as unsigned (what arith's `u` ops see)."""
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _on_unsigned(fn):
    """`fn` computed on the unsigned reading of its operands, its result as their signless type."""
    return lambda op, *xs: fn(*(_unsigned(x) for x in xs)).astype(np.asarray(xs[0]).dtype)


_INT_COMPARE = {
    "eq": np.equal,
    "ne": np.not_equal,
    "slt": np.less,
    "sle": np.less_equal,
    "sgt": np.greater,
    "sge": np.greater_equal,
    "ult": lambda a, b: np.less(_unsigned(a), _unsigned(b)),
    "ule": lambda a, b: np.less_equal(_unsigned(a), _unsigned(b)),
    "ugt": lambda a, b: np.greater(_unsigned(a), _unsigned(b)),
    "uge": lambda a, b: np.greater_equal(_unsigned(a), _unsigned(b)),
}


def _maximumf(a, b):
    """arith.maximumf as LLVM's llvm.maximum computes it: NaN if either is, and -0.0 < 0.0
    (np.maximum returns its second operand when the two compare equal)."""
    return np.where(a == b, np.where(np.signbit(a), b, a), np.maximum(a, b))


def _minimumf(a, b):
    return np.where(a == b, np.where(np.signbit(a), a, b), np.minimum(a, b))


_REDUCE = {
    "add": np.sum,
    "mul": np.prod,
    "maximumf": lambda v: functools.reduce(_maximumf, v),
    "minimumf": lambda v: functools.reduce(_minimumf, v),
    "maxsi": np.max,
    "minsi": np.min,
    "maxui": lambda v: _unsigned(v).max().astype(v.dtype),
    "minui": lambda v: _unsigned(v).min().astype(v.dtype),
    "and": np.bitwise_and.reduce,
    "or": np.bitwise_or.reduce,
}


def _cast(op, x):
    return np.asarray(x).astype(op.results[0].type.dtype)


_SCALAR = {
    AR.AddFOp: lambda op, a, b: a + b,
    AR.SubFOp: lambda op, a, b: a - b,
    AR.MulFOp: lambda op, a, b: a * b,
    AR.DivFOp: lambda op, a, b: np.divide(a, b),
    AR.NegFOp: lambda op, a: -a,
    AR.MaximumFOp: lambda op, a, b: _maximumf(a, b),
    AR.MinimumFOp: lambda op, a, b: _minimumf(a, b),
    AR.AddIOp: lambda op, a, b: a + b,
    AR.SubIOp: lambda op, a, b: a - b,
    AR.MulIOp: lambda op, a, b: a * b,
    AR.MaxSIOp: lambda op, a, b: np.maximum(a, b),
    AR.MinSIOp: lambda op, a, b: np.minimum(a, b),
    AR.AndIOp: lambda op, a, b: a & b,
    AR.OrIOp: lambda op, a, b: a | b,
    AR.XOrIOp: lambda op, a, b: a ^ b,
    AR.CmpFOp: lambda op, a, b: _FLOAT_COMPARE[op.predicate](a, b),
    AR.CmpIOp: lambda op, a, b: _INT_COMPARE[op.predicate](a, b),
    AR.SelectOp: lambda op, c, a, b: np.where(c, a, b),
    AR.ExtFOp: _cast,
    AR.TruncFOp: _cast,
    AR.SIToFPOp: _cast,
    AR.ExtSIOp: _cast,
    AR.TruncIOp: _cast,
    AR.IndexCastOp: lambda op, x: _index_cast(op.result.type, x),
    AR.UIToFPOp: lambda op, x: _unsigned(x).astype(op.result.type.dtype),
    AR.ExtUIOp: lambda op, x: _unsigned(x).astype(op.result.type.dtype),
    AR.FPToSIOp: lambda op, x: AR.float_to_int(x, op.result.type.dtype),
    AR.BitcastOp: lambda op, x: np.asarray(x, op.operand.type.dtype).view(op.result.type.dtype),
    M.ExpOp: lambda op, x: np.exp(x),
    M.LogOp: lambda op, x: np.log(x),
    M.SqrtOp: lambda op, x: np.sqrt(x),
    M.TanhOp: lambda op, x: np.tanh(x),
    M.SinOp: lambda op, x: np.sin(x),
    M.CosOp: lambda op, x: np.cos(x),
    M.AbsFOp: lambda op, x: np.abs(x),
    M.AbsIOp: lambda op, x: np.abs(x),
    M.PowFOp: lambda op, a, b: np.power(a, b),
    M.IPowIOp: _ipow,
    AR.FloorDivSIOp: lambda op, a, b: np.floor_divide(a, b),
    AR.RemSIOp: lambda op, a, b: np.fmod(a, b),
    AR.ShLIOp: lambda op, a, b: np.left_shift(a, b),
    AR.ShRSIOp: lambda op, a, b: np.right_shift(a, b),
    AR.DivUIOp: _on_unsigned(np.floor_divide),
    AR.RemUIOp: _on_unsigned(np.remainder),
    AR.ShRUIOp: _on_unsigned(np.right_shift),
    AR.MaxUIOp: _on_unsigned(np.maximum),
    AR.MinUIOp: _on_unsigned(np.minimum),
    AR.RemFOp: lambda op, a, b: np.fmod(a, b),
    V.BroadcastOp: lambda op, x: _typed(op.result.type, x),
    V.ReductionOp: lambda op, v, *acc: _REDUCE[op.kind](np.concatenate([v, np.asarray(acc, v.dtype).reshape(-1)])),
    V.ExtractOp: lambda op, v: v[op.attributes["position"]],
}
_SCALAR.update((f.op, lambda op, *xs, fn=f.numpy_fn: fn(*xs)) for f in M.FLOAT_FUNCTIONS)
