"""float16 <-> float32/float64 conversions, with numpy's ``astype`` as the oracle, bit for bit:
the LLVM IR of kiln.codegen.llvm_half (JIT-compiled in loops over scalars and over
<8 x ...> vectors) and the CUDA prelude's C helpers (built as host C++, and given to nvcc).
The inputs are every float16, every rounding boundary between neighbouring float16s with
its neighbours in the wider format, the edges (overflow, the subnormals, zeros, infinities,
NaNs) and a million random bit patterns."""

import ctypes
import shutil
import subprocess

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

from kiln.codegen import llvm_target
from kiln.codegen.cuda_prelude import PRELUDE
from kiln.codegen.llvm_half import float_to_half, half_to_float
from kiln.runtime import native

CXX = shutil.which("g++")
NVCC = shutil.which("nvcc")
UINT = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}
IR_TYPE = {np.float16: ir.IntType(16), np.float32: ir.FloatType(), np.float64: ir.DoubleType()}
LANES = 8  # the vector kernels convert <8 x ...> at a time; inputs are padded to a multiple of it
I64 = ir.IntType(64)


def all_halves():
    return np.arange(1 << 16, dtype=np.uint16).view(np.float16)


def numpy_nans(ftype):
    """NaNs of both signs: quiet, signalling, with payload only in the top bits, and with payload
    only in the bits float16 drops (the one case numpy sets a bit to keep it a NaN)."""
    uint, bits = UINT[ftype], np.finfo(ftype).bits
    fraction = np.finfo(ftype).nmant
    exponent = ((1 << (bits - 1)) - 1) ^ ((1 << fraction) - 1)
    payloads = [1 << (fraction - 1), 1, 1 << (fraction - 10), (1 << (fraction - 10)) - 1, (1 << fraction) - 1, 0x155]
    nans = [exponent | p for p in payloads]
    return np.array(nans + [n | (1 << (bits - 1)) for n in nans], dtype=uint).view(ftype)


def boundaries(ftype):
    """Every float16 in `ftype`; every midpoint between neighbouring float16s (ties: to even, both
    ways) including 65520 above the largest finite one and 2**-25 below the smallest subnormal;
    each with its two neighbours in `ftype`; the edges; and for float64, points off a midpoint by
    less than float32's resolution, which would round the other way through float32."""
    halves = all_halves()
    finite = np.sort(halves[np.isfinite(halves) & (halves >= 0)].astype(np.float64))
    finite = np.unique(finite)  # 0.0 and -0.0 once
    midpoints = np.concatenate([[2.0**-25], (finite[:-1] + finite[1:]) / 2, [65520.0]])
    exact = np.concatenate([finite, midpoints, [65504.0, 65536.0, 1e5, 2.0**-24, 3 * 2.0**-25, 2.0**-26]])
    values = [exact.astype(ftype)]
    if ftype is np.float64:
        values += [midpoints * (1 + 2.0**-30), midpoints * (1 - 2.0**-30)]
    values = np.concatenate(values).astype(ftype)
    values = np.concatenate([values, np.nextafter(values, ftype(np.inf)), np.nextafter(values, ftype(0))])
    values = np.concatenate([values, -values])
    tiny = np.finfo(ftype).smallest_subnormal
    edges = np.array([0.0, -0.0, np.inf, -np.inf, tiny, -tiny, np.finfo(ftype).max, -np.finfo(ftype).max], ftype)
    return np.concatenate([values, edges, numpy_nans(ftype)])


def random_patterns(ftype, count=1_000_000):
    uint = UINT[ftype]
    return np.random.default_rng(16).integers(0, np.iinfo(uint).max, count, dtype=uint, endpoint=True).view(ftype)


def to_half(values):
    with np.errstate(over="ignore"):  # numpy reports the overflow to inf, which is the expected result
        return values.astype(np.float16)


def assert_same_bits(inputs, got, want):
    """`got` and `want` equal bit for bit; on failure, the first inputs where they differ, in hex."""
    got, want = got.view(UINT[want.dtype.type]), want.view(UINT[want.dtype.type])
    wrong = np.flatnonzero(got != want)
    shown = [f"{inputs.view(UINT[inputs.dtype.type])[k]:#x}: got {got[k]:#x}, numpy {want[k]:#x}" for k in wrong[:8]]
    assert not len(wrong), f"{len(wrong)} of {len(inputs)} differ from numpy, e.g. " + "; ".join(shown)


def padded(values):
    """`values` contiguous, padded (with a copy of its first element) to a multiple of LANES."""
    return np.ascontiguousarray(np.concatenate([values, np.resize(values[:1], -len(values) % LANES)]))


def conversion_kernel(module, name, source, target, lanes):
    """``void name(source *in, target *out, i64 n)`` converting n elements, `lanes` at a time."""

    def typed(t):
        return ir.VectorType(t, lanes) if lanes > 1 else t

    src, dst = IR_TYPE[source], IR_TYPE[target]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [src.as_pointer(), dst.as_pointer(), I64]), name=name)
    data, out, n = fn.args
    entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(I64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(I64)
    # numpy aligns an array to its elements only, not to a vector of them
    x = b.load(b.bitcast(b.gep(data, [i]), typed(src).as_pointer()), align=np.dtype(source).itemsize)
    y = float_to_half(b, x) if target is np.float16 else half_to_float(b, x, typed(dst))
    b.store(y, b.bitcast(b.gep(out, [i]), typed(dst).as_pointer()), align=np.dtype(target).itemsize)
    following = b.add(i, ir.Constant(I64, lanes))
    i.add_incoming(ir.Constant(I64, 0), entry)
    i.add_incoming(following, loop)
    b.cbranch(b.icmp_signed("<", following, n), loop, done)
    b.position_at_end(done)
    b.ret_void()


CONVERSIONS = [(np.float16, np.float32), (np.float16, np.float64), (np.float32, np.float16), (np.float64, np.float16)]


def kernel_name(source, target, lanes):
    return f"{source.__name__}_to_{target.__name__}_x{lanes}"


@pytest.fixture(scope="module")
def jit():
    """Every conversion as a scalar and as a vector loop, optimized as kiln optimizes its code
    (for the host, vectorizers on) and loaded by MCJIT: name -> convert(values, target)."""
    module = ir.Module("half")
    module.triple = llvm.get_process_triple()
    for source, target in CONVERSIONS:
        for lanes in (1, LANES):
            conversion_kernel(module, kernel_name(source, target, lanes), source, target, lanes)
    compiled = llvm_target.parse_and_verify(str(module))
    llvm_target.optimize(compiled)
    with native.LLVM_LOCK:
        engine = llvm.create_mcjit_compiler(compiled, native.host_target_machine())
        engine.finalize_object()
        addresses = {name: engine.get_function_address(name) for name in (f.name for f in module.functions)}

    def convert(name, values, target):
        values = padded(values)
        out = np.empty(len(values), target)
        signature = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
        signature(addresses[name])(values.ctypes.data, out.ctypes.data, len(values))
        return out

    yield convert  # the suspended fixture keeps the engine, and with it the loaded code, alive


@pytest.mark.parametrize("lanes", [1, LANES])
@pytest.mark.parametrize("target", [np.float32, np.float64])
def test_every_half_widens_exactly_as_numpy(jit, target, lanes):
    halves = all_halves()
    got = jit(kernel_name(np.float16, target, lanes), halves, target)[: len(halves)]
    assert_same_bits(halves, got, halves.astype(target))


@pytest.mark.parametrize("lanes", [1, LANES])
@pytest.mark.parametrize("source", [np.float32, np.float64])
@pytest.mark.parametrize("inputs", [boundaries, random_patterns])
def test_narrowing_rounds_as_numpy(jit, source, lanes, inputs):
    values = inputs(source)
    got = jit(kernel_name(source, np.float16, lanes), values, np.float16)[: len(values)]
    assert_same_bits(values, got, to_half(values))


def test_the_boundaries_hold_doubles_that_round_differently_through_float32():
    """The float64 inputs can tell a conversion that goes through float32 from a direct one."""
    values = boundaries(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # float32 overflows, and casts NaN, as expected
        through_float32 = to_half(values.astype(np.float32))
    assert (through_float32 != to_half(values)).any()


@pytest.mark.parametrize("t", [ir.FloatType(), ir.DoubleType()])
@pytest.mark.parametrize("lanes", [1, LANES])
def test_the_conversions_are_straight_line_integer_code(t, lanes):
    """One basic block, no calls (compiler-rt's half conversions cannot be loaded), no ``half``,
    no float arithmetic or conversion instructions: only bit operations, lane by lane."""
    module = ir.Module()
    i16 = ir.IntType(16)
    if lanes > 1:
        t, i16 = ir.VectorType(t, lanes), ir.VectorType(i16, lanes)
    for name, argument, result, body in [
        ("widen", i16, t, lambda b, x: half_to_float(b, x, t)),
        ("narrow", t, i16, lambda b, x: float_to_half(b, x)),
    ]:
        fn = ir.Function(module, ir.FunctionType(result, [argument]), name=name)
        b = ir.IRBuilder(fn.append_basic_block())
        b.ret(body(b, fn.args[0]))
        assert len(fn.blocks) == 1
        opcodes = {instruction.opname for instruction in fn.blocks[0].instructions}
        assert opcodes <= {
            "and",
            "or",
            "shl",
            "lshr",
            "add",
            "sub",
            "icmp",
            "select",
            "zext",
            "trunc",
            "bitcast",
            "ret",
        }
        assert "half" not in str(fn)
    llvm_target.parse_and_verify(str(module))


C_LOOPS = r"""
#define KILN_CONVERT(name, from, to, convert) \
    extern "C" void name(const from *x, to *out, long long n) { for (long long i = 0; i < n; i++) out[i] = convert(x[i]); }
KILN_CONVERT(float16_to_float32, unsigned short, float, kiln_half_to_float)
KILN_CONVERT(float16_to_float64, unsigned short, double, kiln_half_to_double)
KILN_CONVERT(float32_to_float16, float, unsigned short, kiln_float_to_half)
KILN_CONVERT(float64_to_float16, double, unsigned short, kiln_double_to_half)
"""


@pytest.fixture(scope="module")
def c_helpers(tmp_path_factory):
    """The prelude's helpers built as host C++, in loops: name -> convert(values, target)."""
    if CXX is None:
        pytest.skip("no C++ compiler (g++) for the host emulation")
    folder = tmp_path_factory.mktemp("half")
    source, library = folder / "half.cu", folder / "half.so"
    source.write_text(PRELUDE + C_LOOPS)
    compiler = [CXX, "-DKILN_EMULATE", "-x", "c++", "-O1", "-shared", "-fPIC", str(source), "-o", str(library)]
    subprocess.run(compiler, check=True)
    lib = ctypes.CDLL(str(library))

    def convert(name, values, target):
        values = np.ascontiguousarray(values)
        out = np.empty(len(values), target)
        getattr(lib, name)(ctypes.c_void_p(values.ctypes.data), ctypes.c_void_p(out.ctypes.data), len(values))
        return out

    return convert


@pytest.mark.parametrize("target", [np.float32, np.float64])
def test_the_c_helpers_widen_every_half_exactly_as_numpy(c_helpers, target):
    halves = all_halves()
    assert_same_bits(halves, c_helpers(f"float16_to_{target.__name__}", halves, target), halves.astype(target))


@pytest.mark.parametrize("source", [np.float32, np.float64])
@pytest.mark.parametrize("inputs", [boundaries, random_patterns])
def test_the_c_helpers_narrow_as_numpy(c_helpers, source, inputs):
    values = inputs(source)
    assert_same_bits(values, c_helpers(f"{source.__name__}_to_float16", values, np.float16), to_half(values))


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (install the CUDA toolkit to check the CUDA C)")
def test_nvcc_compiles_the_c_helpers_for_the_gpu(tmp_path):
    kernel = r"""
__global__ void convert(const unsigned short *h, const float *f, const double *d, float *wide, double *wider,
                        unsigned short *narrow, unsigned short *narrower) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    wide[i] = kiln_half_to_float(h[i]);
    wider[i] = kiln_half_to_double(h[i]);
    narrow[i] = kiln_float_to_half(f[i]);
    narrower[i] = kiln_double_to_half(d[i]);
}
"""
    source = tmp_path / "half.cu"
    source.write_text(PRELUDE + kernel)
    result = subprocess.run(
        [NVCC, "-c", "-diag-suppress", "177", str(source), "-o", str(tmp_path / "half.o")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
