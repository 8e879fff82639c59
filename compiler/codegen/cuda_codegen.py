"""CUDA C for an affine-level module: one ``__global__`` function per kernel and an
``extern "C"`` host entry that launches them in order.

GPU mapping: each kernel's perfectly nested result loops are flattened into
one index that a grid-stride loop spreads over every thread of every block
(one thread per output element); what is inside them (reductions, a matmul's
k loop, a row's inner loops) runs sequentially in that thread. The host entry
allocates the memory arena with ``cudaMalloc``, checks every CUDA call and the
last error after each launch, synchronizes, and returns 0 or an error code.

The same source compiles as plain C++ with ``KILN_EMULATE`` defined: the grid
and block loops are then explicit loops on the CPU (kiln's tests check the
kernels' numbers that way on machines without a GPU).
"""

from __future__ import annotations

import math
import re

import numpy as np

from kiln.codegen.llvm_ops import accumulates
from kiln.codegen.status import STATUS
from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import func as F
from kiln.dialects import math as M
from kiln.dialects import memref as MR
from kiln.dialects.affine import BIND
from kiln.dialects.affine_expr import Binary, Const, Dim
from kiln.dialects.types import MemRefType

THREADS_PER_BLOCK = 256
THREADS_PER_BLOCK_MAX = 1024
REDUCTION_BLOCKS = 1024  # enough to fill a GPU; more would only add atomics on one address
PAIRWISE_GROUP = 64  # KILN_GROUP in PRELUDE: partial sums added per thread per pairwise launch
CUDA_ERROR_BASE = 1000  # the host entry returns kiln's status codes as they are, CUDA's errors above this
C_TYPES = {
    "f32": "float",
    "f64": "double",
    "i1": "bool",
    "i8": "unsigned char",
    "i32": "int",
    "i64": "long long",
    "index": "long long",
}
STORED = dict(C_TYPES, i1="unsigned char")

PRELUDE = r"""#include <math.h>
#include <stdint.h>
#ifdef KILN_EMULATE  /* plain C++ on the CPU: grid and block loops made explicit */
#include <stdlib.h>
#include <string.h>
#define __global__
#define __device__
struct kiln_dim3 { unsigned x, y, z; };
static thread_local kiln_dim3 blockIdx, threadIdx, blockDim, gridDim;
typedef int cudaError_t;
#define cudaSuccess 0
static inline cudaError_t cudaMalloc(void **p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 2; }
static inline cudaError_t cudaFree(void *p) { free(p); return 0; }
static inline cudaError_t cudaGetLastError(void) { return 0; }
static inline cudaError_t cudaDeviceSynchronize(void) { return 0; }
#define KILN_READ_STATUS(dst) ((dst) = kiln_status, kiln_status = 0, cudaSuccess)
#define KILN_ATOMIC(combine, address, value) (*(address) = combine(*(address), (value)))
#define KILN_LAUNCH(kernel, blocks, threads, ...) do { \
    gridDim.x = (blocks); blockDim.x = (threads); gridDim.y = gridDim.z = blockDim.y = blockDim.z = 1; \
    for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++) \
        for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++) kernel(__VA_ARGS__); } while (0)
#define KILN_LAUNCH3(kernel, gx, gy, gz, bx, by, bz, ...) do { \
    gridDim.x = (gx); gridDim.y = (gy); gridDim.z = (gz); blockDim.x = (bx); blockDim.y = (by); blockDim.z = (bz); \
    for (blockIdx.z = 0; blockIdx.z < gridDim.z; blockIdx.z++) \
    for (blockIdx.y = 0; blockIdx.y < gridDim.y; blockIdx.y++) \
    for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++) \
    for (threadIdx.z = 0; threadIdx.z < blockDim.z; threadIdx.z++) \
    for (threadIdx.y = 0; threadIdx.y < blockDim.y; threadIdx.y++) \
    for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++) kernel(__VA_ARGS__); } while (0)
#else
#define KILN_LAUNCH(kernel, blocks, threads, ...) kernel<<<(blocks), (threads)>>>(__VA_ARGS__)
#define KILN_LAUNCH3(kernel, gx, gy, gz, bx, by, bz, ...) \
    kernel<<<dim3((gx), (gy), (gz)), dim3((bx), (by), (bz))>>>(__VA_ARGS__)
#endif

__device__ int kiln_status = 0;
#ifndef KILN_EMULATE
/* Read the status the kernels set, and clear it for the next call. */
static cudaError_t kiln_read_status(int *dst) {
    static const int zero = 0;
    cudaError_t error = cudaMemcpyFromSymbol(dst, kiln_status, sizeof(int));
    return error != cudaSuccess ? error : cudaMemcpyToSymbol(kiln_status, &zero, sizeof(int));
}
#define KILN_READ_STATUS(dst) kiln_read_status(&(dst))
#endif
__device__ static inline long long kiln_floordiv(long long a, long long b) {
    long long q = a / b; return (a % b != 0 && a < 0) ? q - 1 : q; }
__device__ static inline long long kiln_mod(long long a, long long b) { long long r = a % b; return r < 0 ? r + b : r; }
/* arith.maximumf / minimumf: NaN if either is, and -0.0 < 0.0 (IEEE 754 maximum, LLVM's llvm.maximum). */
__device__ static inline float kiln_maxf(float a, float b) {
    return (a != a || b != b) ? NAN : (a > b || (a == b && !signbit(a)) ? a : b); }
__device__ static inline float kiln_minf(float a, float b) {
    return (a != a || b != b) ? NAN : (a < b || (a == b && signbit(a)) ? a : b); }
__device__ static inline double kiln_max(double a, double b) {
    return (a != a || b != b) ? NAN : (a > b || (a == b && !signbit(a)) ? a : b); }
__device__ static inline double kiln_min(double a, double b) {
    return (a != a || b != b) ? NAN : (a < b || (a == b && signbit(a)) ? a : b); }
/* Integer arithmetic wraps around as numpy's does: it is done in unsigned types, because
   signed overflow is undefined behaviour that compilers fold on ((x + 1) > x is "true"). */
__device__ static inline long long kiln_ipow(long long base, long long e) {
    if (e < 0) { kiln_status = KILN_NEGATIVE_POWER; return 0; }
    unsigned long long r = 1, b = (unsigned long long)base;
    while (e) { if (e & 1) r *= b; b *= b; e >>= 1; } return (long long)r; }
/* kiln.dialects.arith.float_to_int: truncation; NaN and out of range give the minimum
   (-bound), as x86's conversion does; a plain C cast is undefined there. */
__device__ static inline long long kiln_f2i(float x, float bound) {
    return (x > -bound && x < bound) ? (long long)x : (long long)-bound; }
__device__ static inline long long kiln_f2i(double x, double bound) {
    return (x > -bound && x < bound) ? (long long)x : (long long)-bound; }
__device__ static inline float kiln_add(float a, float b) { return a + b; }
__device__ static inline double kiln_add(double a, double b) { return a + b; }
__device__ static inline int kiln_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ static inline long long kiln_add(long long a, long long b) {
    return (long long)((unsigned long long)a + (unsigned long long)b); }
/* Float + and - rounded on their own: nvcc fuses a * b + c into one FMA unless the add is
   __fadd_rn; kiln fuses only accumulations (see kiln.codegen.llvm_ops.accumulates), as numpy does. */
#ifdef KILN_EMULATE
#define kiln_fadd(a, b) ((a) + (b))
#define kiln_fsub(a, b) ((a) - (b))
#define kiln_dadd(a, b) ((a) + (b))
#define kiln_dsub(a, b) ((a) - (b))
#else
#define kiln_fadd __fadd_rn
#define kiln_fsub __fsub_rn
#define kiln_dadd __dadd_rn
#define kiln_dsub __dsub_rn
#endif
/* A whole-tensor float sum keeps one partial sum per thread; each launch of its _pairwise
   kernel sums groups of KILN_GROUP partials, `stride` apart, as a balanced tree into the
   group's first: the error grows with log(threads), where atomicAdd into one total adds a
   rounding per thread, in an order that changes from run to run. */
#define KILN_GROUP 64
template <typename T> __device__ static inline T kiln_pairwise_group(const T *p, long long left, long long stride) {
    T v[KILN_GROUP];
    for (int k = 0; k < KILN_GROUP; k++) v[k] = k * stride < left ? p[k * stride] : (T)0;
    for (int half = KILN_GROUP / 2; half >= 1; half /= 2)
        for (int k = 0; k < half; k++) v[k] += v[k + half];
    return v[0]; }
#ifndef KILN_EMULATE
/* Combine a thread's partial result into a reduction's global result: atomicAdd where the
   hardware has it, a compare-and-swap loop for maximum and minimum. */
#define KILN_ATOMIC(combine, address, value) kiln_atomic_##combine((address), (value))
__device__ static inline void kiln_atomic_kiln_add(float *a, float v) { atomicAdd(a, v); }
__device__ static inline void kiln_atomic_kiln_add(double *a, double v) { atomicAdd(a, v); }
__device__ static inline void kiln_atomic_kiln_add(long long *a, long long v) {
    atomicAdd((unsigned long long *)a, (unsigned long long)v); }
__device__ static inline void kiln_atomic_kiln_add(int *a, int v) { atomicAdd(a, v); }
__device__ static inline unsigned long long kiln_double_bits(double x) { return (unsigned long long)__double_as_longlong(x); }
__device__ static inline double kiln_bits_double(unsigned long long x) { return __longlong_as_double((long long)x); }
#define KILN_CAS_LOOP(name, type, word, to_word, from_word, pick) \
__device__ static inline void kiln_atomic_##name(type *a, type v) { \
    word *p = (word *)a, old = *p, assumed; \
    do { assumed = old; old = atomicCAS(p, assumed, to_word(pick(from_word(assumed), v))); } while (assumed != old); }
KILN_CAS_LOOP(kiln_maxf, float, int, __float_as_int, __int_as_float, kiln_maxf)
KILN_CAS_LOOP(kiln_minf, float, int, __float_as_int, __int_as_float, kiln_minf)
KILN_CAS_LOOP(kiln_max, double, unsigned long long, kiln_double_bits, kiln_bits_double, kiln_max)
KILN_CAS_LOOP(kiln_min, double, unsigned long long, kiln_double_bits, kiln_bits_double, kiln_min)
#endif
""".replace("KILN_NEGATIVE_POWER", str(STATUS["negative integer power"]))


def emit_cuda(module, prefix: str = "", prelude: bool = True) -> str:
    """CUDA C source for `module` (affine level). `prefix` keeps names unique when several
    modules share one file (then only the first needs the prelude)."""
    parts = [PRELUDE] if prelude else []
    for op in module.body.ops:
        if isinstance(op, MR.GlobalOp):
            parts.append(_global(op, prefix))
    for op in module.body.ops:
        if isinstance(op, F.FuncOp):
            parts.append(_FunctionEmitter(op, prefix).emit())
    return "\n".join(parts)


def entry_name(function_name: str, prefix: str = "") -> str:
    return "kiln_" + prefix + re.sub(r"\W", "_", function_name)


def _global(op, prefix) -> str:
    t = op.type
    values = op.initial_value.reshape(-1)
    literal = ", ".join(_literal(v, t.element.name) for v in values) or "0"
    return f"__device__ const {STORED[t.element.name]} {prefix}{op.sym_name}[{max(1, values.size)}] = {{{literal}}};"


def _literal(value, type_name: str) -> str:
    if type_name in ("f32", "f64"):
        v = float(value)
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "-INFINITY"
        text = repr(v)
        return (
            text + ("f" if type_name == "f32" else "")
            if ("." in text or "e" in text)
            else text + (".0f" if type_name == "f32" else ".0")
        )
    if type_name == "i1":
        return "1" if value else "0"
    wide = type_name in ("i64", "index")
    if int(value) == -(2 ** (63 if wide else 31)):  # the literal of -INT_MIN does not fit its type
        return f"({int(value) + 1}{'LL' if wide else ''} - 1)"
    return f"{int(value)}LL" if wide else str(int(value))


class _FunctionEmitter:
    def __init__(self, function: F.FuncOp, prefix: str):
        self.function = function
        self.prefix = prefix
        self.names = {}
        self.counter = 0
        self.kernels = []

    def name(self, value) -> str:
        if value not in self.names:
            self.names[value] = f"v{self.counter}"
            self.counter += 1
        return self.names[value]

    def emit(self) -> str:
        fn = self.function
        host, kernel_sources = [], []
        params = [f"{STORED[a.type.element.name]} *{self.name(a)}" for a in fn.arguments]
        host.append(f'extern "C" int {entry_name(fn.sym_name, self.prefix)}({", ".join(params) or "void"}) {{')
        host.append("    cudaError_t error = cudaSuccess;")
        host.append("    int status = 0;")
        for op in fn.body.ops:  # every buffer declared before the first goto
            if isinstance(op, (MR.AllocOp, MR.ViewOp)):
                t = op.result.type
                host.append(f"    {STORED[t.element.name]} *{self.name(op.result)} = 0;")
            elif isinstance(op, AR.ConstantOp):
                self.names[op.result] = _literal(op.value, op.result.type.name)
        allocations, loose = [], []
        # Scalars computed at top level (a full reduction, a 0-d result) and read by a later
        # kernel live in __device__ variables: kernels cannot see each other's locals.
        self.shared = {
            v: f"{entry_name(fn.sym_name, self.prefix)}_s{k}" for k, v in enumerate(_crossing_scalars(fn.body.ops))
        }
        shared_declarations = [f"__device__ {C_TYPES[v.type.name]} {g};" for v, g in self.shared.items()]
        for op in fn.body.ops:
            parallel = isinstance(op, (A.ForOp, A.ParallelOp)) and not op.results
            reduction = _full_reduction(op)
            if loose and (parallel or reduction or not _is_device(op)):
                kernel_sources.append(self.kernel(None, host, loose))
                loose = []
            if parallel and any(BIND in inner.attributes for inner in op.walk()):
                kernel_sources.append(self.bound_kernel(op, host))
            elif parallel:
                kernel_sources.append(self.kernel(op, host))
            elif reduction:
                kernel_sources.append(self.reduction_kernel(reduction, host))
            elif _is_device(op):  # scalar work (a full reduction, a 0-d result): one thread
                loose.append(op)
            else:
                self.host_statement(op, host, allocations)
        if loose:
            kernel_sources.append(self.kernel(None, host, loose))
        host.append("    error = cudaDeviceSynchronize();")
        host.append("    if (error == cudaSuccess) error = KILN_READ_STATUS(status);")
        host.append("done:")
        for v in reversed(allocations):
            host.append(f"    if ({v}) cudaFree({v});")
        host.append(f"    return error != cudaSuccess ? {CUDA_ERROR_BASE} + (int)error : status;")
        host.append("}")
        return "\n".join(shared_declarations + kernel_sources + host) + "\n"

    def host_statement(self, op, host, allocations) -> None:
        if isinstance(op, MR.AllocOp):
            t = op.result.type
            v = self.name(op.result)
            host.append(
                f"    if (cudaMalloc((void **)&{v}, {max(1, t.size) * t.dtype.itemsize}) != cudaSuccess) "
                f"{{ status = {STATUS['out of memory']}; goto done; }}"
            )
            allocations.append(v)
        elif isinstance(op, MR.ViewOp):
            shift = op.byte_shift.op.value
            t = op.result.type
            host.append(
                f"    {self.name(op.result)} = "
                f"({STORED[t.element.name]} *)((unsigned char *){self.name(op.source)} + {shift});"
            )
        elif isinstance(op, MR.GetGlobalOp):
            self.names[op.result] = self.prefix + op.attributes["name"]
        elif not isinstance(op, (AR.ConstantOp, MR.DeallocOp, F.ReturnOp)):
            raise NotImplementedError(f"no CUDA host code for {op.name}")

    # -- one kernel ------------------------------------------------------------------------
    def kernel(self, nest, host, statements=None) -> str:
        """A __global__ function for a loop nest (or for loose statements, run by one thread)."""
        number = len(self.kernels)
        self.kernels.append(nest)
        chain = [nest] if nest is not None else []
        while chain:
            body = [op for op in chain[-1].body.ops if not isinstance(op, A.YieldOp)]
            if len(body) == 1 and isinstance(body[0], A.ForOp) and not body[0].inits and body[0].constant_bounds:
                chain.append(body[0])
            else:
                break
        if chain and isinstance(chain[0], A.ForOp) and (chain[0].inits or not chain[0].constant_bounds):
            chain = []
        extents = [l.upper for l in chain]
        total = int(np.prod(extents, dtype=np.int64)) if chain else 1
        if total == 0:  # an empty tensor: nothing to launch
            return ""
        used = self._external_buffers(statements if nest is None else [nest])
        name = f"{entry_name(self.function.sym_name, self.prefix)}_k{number}"
        params = ", ".join(f"{STORED[v.type.element.name]} *{self.name(v)}" for v in used) or "void"
        lines = [f"__global__ void {name}({params}) {{"] + self._grid_stride(chain, extents, total)
        inner = chain[-1].body.ops if chain else (statements if nest is None else [nest])
        self.lines = lines
        self.indent = 2
        self._read_shared(statements if nest is None else [nest])
        self._carried = []  # the values an affine.yield assigns, in the loop being emitted
        self.block(inner)
        lines.append("    }")
        lines.append("}")
        threads = min(THREADS_PER_BLOCK, total)
        blocks = min(65535, -(-total // threads))
        args = ", ".join(self.name(v) for v in used)
        host.append(f"    KILN_LAUNCH({name}, {blocks}, {threads}{', ' if args else ''}{args});")
        host.append("    if ((error = cudaGetLastError()) != cudaSuccess) goto done;")
        return "\n".join(lines) + "\n"

    def bound_kernel(self, nest, host) -> str:
        """A kernel whose schedule binds loops to block and thread indices: each bound loop
        strides over its index, the others run in every thread."""
        number = len(self.kernels)
        self.kernels.append(nest)
        name = f"{entry_name(self.function.sym_name, self.prefix)}_k{number}"
        extents = {op.attributes[BIND]: op.trip_count for op in nest.walk() if BIND in op.attributes}
        threads = {}
        for axis in "xyz":  # at most 1024 threads a block; strided loops cover the rest
            room = THREADS_PER_BLOCK_MAX // int(np.prod(list(threads.values()) or [1]))
            threads[axis] = max(1, min(extents.get(f"threadIdx.{axis}", 1), room))
        blocks = {axis: max(1, min(extents.get(f"blockIdx.{axis}", 1), 65535)) for axis in "xyz"}
        used = self._external_buffers([nest])
        params = ", ".join(f"{STORED[v.type.element.name]} *{self.name(v)}" for v in used) or "void"
        self.lines, self.indent, self._carried = [f"__global__ void {name}({params}) {{"], 1, []
        self._read_shared([nest])
        self.block([nest])
        self.lines.append("}")
        args = ", ".join(self.name(v) for v in used)
        config = ", ".join(str(d) for d in list(blocks.values()) + list(threads.values()))
        host.append(f"    KILN_LAUNCH3({name}, {config}{', ' if args else ''}{args});")
        host.append("    if ((error = cudaGetLastError()) != cudaSuccess) goto done;")
        return "\n".join(self.lines) + "\n"

    def reduction_kernel(self, reduction, host) -> str:
        """A reduction of a whole tensor to one scalar, spread over the grid: each thread
        combines a strided share of the elements (coalesced reads), then atomically into the
        result, or, for a float sum, into an array of partial sums added up pairwise."""
        loops, combine, init = reduction
        result = loops[0].results[0]
        target = self.shared[result]
        number = len(self.kernels)
        self.kernels.append(loops[0])
        name = f"{entry_name(self.function.sym_name, self.prefix)}_k{number}"
        extents = [l.upper for l in loops]
        total = int(np.prod(extents, dtype=np.int64))
        used = self._external_buffers([loops[0]])
        params = ", ".join(f"{STORED[v.type.element.name]} *{self.name(v)}" for v in used) or "void"
        c_type = C_TYPES[result.type.name]
        partial = self.name(loops[-1].body.args[1])
        for loop in loops:  # every level's accumulator is the thread's partial result
            self.names[loop.body.args[1]] = partial
        lines = [
            f"__global__ void {name}_init(void) {{ {target} = {self.expr(init)}; }}",
            "",
            f"__global__ void {name}({params}) {{",
            f"    {c_type} {partial} = {self.expr(init)};",
        ] + self._grid_stride(loops, extents, total)
        self.lines, self.indent, self._carried = lines, 2, [partial]
        self._read_shared([loops[0]])
        self.block(loops[-1].body.ops)
        lines.append("    }")
        threads = max(1, min(THREADS_PER_BLOCK, total))  # an empty reduction still launches: its init is the result
        blocks = max(1, min(REDUCTION_BLOCKS, -(-total // threads)))
        args = ", ".join(self.name(v) for v in used)
        if combine == "kiln_add" and result.type.name in ("f32", "f64"):  # float sums: pairwise, not atomics
            count = blocks * threads
            lines.append(f"    {name}_partials[(long long)blockIdx.x * blockDim.x + threadIdx.x] = {partial};")
            lines.append("}")
            lines[:2] = [
                f"__device__ {c_type} {name}_partials[{count}];",
                f"__global__ void {name}_pairwise(long long stride) {{",
                "    long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * KILN_GROUP * stride;",
                f"    if (first < {count}LL) {name}_partials[first] = "
                f"kiln_pairwise_group({name}_partials + first, {count}LL - first, stride); }}",
                f"__global__ void {name}_result(void) {{ {target} = {name}_partials[0]; }}",
                "",
            ]
            host.append(f"    KILN_LAUNCH({name}, {blocks}, {threads}{', ' if args else ''}{args});")
            stride = 1
            while stride < count:
                groups = -(-count // (PAIRWISE_GROUP * stride))
                host.append(
                    f"    KILN_LAUNCH({name}_pairwise, {-(-groups // THREADS_PER_BLOCK)}, "
                    f"{min(groups, THREADS_PER_BLOCK)}, {stride}LL);"
                )
                stride *= PAIRWISE_GROUP
            host.append(f"    KILN_LAUNCH({name}_result, 1, 1);")
        else:
            lines.append(f"    KILN_ATOMIC({combine}, &{target}, {partial});")
            lines.append("}")
            host.append(f"    KILN_LAUNCH({name}_init, 1, 1);")
            host.append(f"    KILN_LAUNCH({name}, {blocks}, {threads}{', ' if args else ''}{args});")
        host.append("    if ((error = cudaGetLastError()) != cudaSuccess) goto done;")
        self.names[result] = self.name(result)
        return "\n".join(lines) + "\n"

    def _grid_stride(self, loops, extents, total) -> list:
        """The grid-stride loop over `total` flattened iterations, and each loop's index
        recovered from the flat one (the last loop varies fastest)."""
        lines = [
            "    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
            f"t < {total}LL; t += (long long)gridDim.x * blockDim.x) {{"
        ]
        remaining = "t"
        for loop, extent in reversed(list(zip(loops, extents))):
            lines.append(f"        long long {self.name(loop.induction_variable)} = {remaining} % {extent}LL;")
            remaining = f"({remaining} / {extent}LL)"
        return lines

    def _read_shared(self, roots) -> None:
        """Load the top-level scalars these ops read from their __device__ variables."""
        for value in self._shared_reads(roots):
            self.line(f"{C_TYPES[value.type.name]} {self.name(value)} = {self.shared[value]};")

    def _shared_reads(self, roots) -> list:
        return _read_from_outside(roots, lambda v: v in self.shared)

    def _external_buffers(self, roots) -> list:
        """The buffers these ops use, made outside them: the kernel's parameters (globals
        are visible to every kernel, so they are not passed)."""
        return _read_from_outside(
            roots, lambda v: isinstance(v.type, MemRefType) and not isinstance(getattr(v, "op", None), MR.GetGlobalOp)
        )

    # -- statements ---------------------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def block(self, ops) -> None:
        for op in ops:
            self.statement(op)

    def statement(self, op) -> None:
        self._statement(op)
        for result in op.results:
            if result in self.shared:
                self.line(f"{self.shared[result]} = {self.expr(result)};")

    def _statement(self, op) -> None:
        if isinstance(op, A.YieldOp):
            for target, value in zip(self._carried, op.operands):
                self.line(f"{target} = {self.expr(value)};")
            return
        if isinstance(op, A.ForOp):
            carried = [self.name(a) for a in op.body.args[1:]]
            for var, init, result in zip(carried, op.inits, op.results):
                self.line(f"{C_TYPES[init.type.name]} {var} = {self.expr(init)};")
                self.names[result] = var
            iv = self.name(op.induction_variable)
            bound = str(op.upper) if op.constant_bounds else self._min(op)
            if BIND in op.attributes:  # checked by the bind step: from 0 by 1, no iter_args
                index = op.attributes[BIND]
                size = index.replace("blockIdx", "gridDim").replace("threadIdx", "blockDim")
                self.line(f"for (long long {iv} = {index}; {iv} < {bound}; {iv} += {size}) {{")
            else:
                self.line(f"for (long long {iv} = {op.lower}; {iv} < {bound}; {iv} += {op.step}) {{")
            self.indent += 1
            saved, self._carried = self._carried, carried
            self.block(op.body.ops)
            self._carried = saved
            self.indent -= 1
            self.line("}")
            return
        if isinstance(op, A.LoadOp):
            t = op.result.type
            load = f"{self.name(op.memref)}[{self.offset(op)}]"
            self.line(f"{C_TYPES[t.name]} {self.name(op.result)} = {load}{' != 0' if t.name == 'i1' else ''};")
            return
        if isinstance(op, A.StoreOp):
            self.line(f"{self.name(op.memref)}[{self.offset(op)}] = {self.expr(op.operands[0])};")
            return
        if isinstance(op, AR.ConstantOp):
            self.names[op.result] = _literal(op.value, op.result.type.name)
            return
        value = _EXPRESSIONS.get(type(op))
        if value is None:
            raise NotImplementedError(f"no CUDA code for {op.name}")
        t = op.results[0].type
        self.line(f"{C_TYPES[t.name]} {self.name(op.results[0])} = {value(self, op)};")

    def expr(self, value) -> str:
        return self.names.get(value) or self.name(value)

    def offset(self, access) -> str:
        strides = access.memref.type.strides
        terms = [f"({self.index(e, access.indices)}) * {s}LL" for e, s in zip(access.map.results, strides)]
        return " + ".join(terms) or "0"

    def index(self, expr, operands) -> str:
        if isinstance(expr, Const):
            return f"{expr.value}LL"
        if isinstance(expr, Dim):
            return self.expr(operands[expr.index])
        assert isinstance(expr, Binary)
        a, b = self.index(expr.lhs, operands), self.index(expr.rhs, operands)
        if expr.kind == "+":
            return f"({a} + {b})"
        if expr.kind == "*":
            return f"({a} * {b})"
        if expr.kind == "floordiv":
            return f"kiln_floordiv({a}, {b})"
        if expr.kind == "ceildiv":
            return f"(-kiln_floordiv(-({a}), {b}))"
        return f"kiln_mod({a}, {b})"

    def _min(self, op) -> str:
        values = [self.index(e, op.bound_operands) for e in op.upper_map.results]
        text = values[0]
        for v in values[1:]:
            text = f"(({text}) < ({v}) ? ({text}) : ({v}))"
        return text


def _read_from_outside(roots, wanted) -> list:
    """The values, in order of first use, that ops in `roots` read, are `wanted`, and are
    not made inside `roots`."""
    ops = [op for root in roots for op in root.walk()]
    inside = {r for op in ops for r in op.results}
    found = []
    for op in ops:
        for v in op.operands:
            if v not in inside and v not in found and wanted(v):
                found.append(v)
    return found


def _is_device(op) -> bool:
    """Whether a top-level op runs on the GPU (loops and loose scalar work) rather than the host."""
    return not isinstance(op, (MR.AllocOp, MR.ViewOp, MR.GetGlobalOp, MR.DeallocOp, AR.ConstantOp, F.ReturnOp))


_COMBINE = {
    (AR.AddFOp, "f32"): "kiln_add",
    (AR.AddFOp, "f64"): "kiln_add",
    (AR.AddIOp, "i64"): "kiln_add",
    (AR.AddIOp, "i32"): "kiln_add",
    (AR.MaximumFOp, "f32"): "kiln_maxf",
    (AR.MaximumFOp, "f64"): "kiln_max",
    (AR.MinimumFOp, "f32"): "kiln_minf",
    (AR.MinimumFOp, "f64"): "kiln_min",
}
_IDENTITY = {
    "kiln_add": 0.0,
    "kiln_maxf": -math.inf,
    "kiln_max": -math.inf,
    "kiln_minf": math.inf,
    "kiln_min": math.inf,
}


def _full_reduction(op):
    """(the loops, the combining function, the init) when `op` reduces a whole iteration
    space to one scalar (``sum``, ``max``, ``min`` of a tensor), else None.

    The shape: perfectly nested affine.for loops from 0 by 1 to constants, one accumulator
    threaded through all of them, started at the combine's identity, and updated by one
    ``acc = combine(acc, x)`` in the innermost body that nothing else reads.
    """
    if not isinstance(op, A.ForOp) or len(op.inits) != 1 or op.inits[0].type.name not in ("f32", "f64", "i32", "i64"):
        return None
    loops = [op]
    while True:
        loop = loops[-1]
        if not (loop.constant_bounds and loop.lower == 0 and loop.step == 1 and len(loop.inits) == 1):
            return None
        body = loop.body.ops
        inner = body[0] if len(body) == 2 and isinstance(body[0], A.ForOp) else None
        if inner is None or inner.inits[:1] != [loop.body.args[1]] or body[1].operands != [inner.results[0]]:
            break
        loops.append(inner)
    accumulator = loops[-1].body.args[1]
    yielded = loops[-1].body.ops[-1].operands[0]
    update = getattr(yielded, "op", None)
    combine = _COMBINE.get((type(update), accumulator.type.name))
    if combine is None or update.operands[0] is not accumulator or update.operands[1] is accumulator:
        return None
    if any(v is accumulator for inner in loops[-1].body.ops if inner is not update for v in inner.operands):
        return None
    init = op.inits[0]
    producer = getattr(init, "op", None)
    if not isinstance(producer, AR.ConstantOp) or float(producer.value) != _IDENTITY[combine]:
        return None
    return loops, combine, init


def _crossing_scalars(ops) -> list:
    """Scalar results of top-level ops that another top-level op reads."""
    producer = {r: op for op in ops if _is_device(op) for r in op.results if not isinstance(r.type, MemRefType)}
    found = []
    for op in ops:
        for inner in op.walk():
            for v in inner.operands:
                if v in producer and producer[v] is not op and v not in found:
                    found.append(v)
    return found


def _binary(symbol):
    return lambda e, op: f"({e.expr(op.lhs)} {symbol} {e.expr(op.rhs)})"


def _call(function_f32, function_f64=None):
    def emit(e, op):
        name = function_f32 if op.results[0].type.name == "f32" else (function_f64 or function_f32)
        return f"{name}({', '.join(e.expr(v) for v in op.operands)})"

    return emit


_FLOAT_COMPARE = {"oeq": "==", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">="}
_INT_COMPARE = {
    "eq": "==",
    "ne": "!=",
    "slt": "<",
    "sle": "<=",
    "sgt": ">",
    "sge": ">=",
    "ult": "<",
    "ule": "<=",
    "ugt": ">",
    "uge": ">=",
}


def _cmpf(e, op):
    a, b = e.expr(op.lhs), e.expr(op.rhs)
    if op.predicate == "une":
        return f"!({a} == {b})"
    if op.predicate not in _FLOAT_COMPARE:
        raise NotImplementedError(f"arith.cmpf {op.predicate} in CUDA")
    return f"({a} {_FLOAT_COMPARE[op.predicate]} {b})"


def _cast(e, op):
    return f"({C_TYPES[op.result.type.name]})({e.expr(op.operand)})"


def _fptosi(e, op):
    bound = _literal(2.0 ** (8 * op.result.type.dtype.itemsize - 1), op.operand.type.name)
    return f"({C_TYPES[op.result.type.name]})kiln_f2i({e.expr(op.operand)}, {bound})"


def _rounded(symbol, name):
    """Float `symbol`, fused with a multiply only where it accumulates."""

    def emit(e, op):
        if accumulates(op):
            return f"({e.expr(op.lhs)} {symbol} {e.expr(op.rhs)})"
        prefix = "kiln_f" if op.result.type.name == "f32" else "kiln_d"
        return f"{prefix}{name}({e.expr(op.lhs)}, {e.expr(op.rhs)})"

    return emit


_UNSIGNED = {"i32": "unsigned", "i64": "unsigned long long", "index": "unsigned long long", "i1": "unsigned"}


def _wrapping(symbol):
    """Integer `symbol` done in the unsigned type of the same width, so it wraps (on i1: mod 2)."""

    def emit(e, op):
        t = op.results[0].type.name
        u = _UNSIGNED[t]
        value = f"(({u}){e.expr(op.lhs)} {symbol} ({u}){e.expr(op.rhs)})"
        return f"({C_TYPES[t]})({value} & 1u)" if t == "i1" else f"({C_TYPES[t]}){value}"

    return emit


def _absi(e, op):
    x, t = e.expr(op.operand), op.result.type.name
    return f"({x} < 0 ? ({C_TYPES[t]})(0 - ({_UNSIGNED[t]}){x}) : {x})"  # abs(INT_MIN) is INT_MIN, as in numpy


_EXPRESSIONS = {
    AR.AddFOp: _rounded("+", "add"),
    AR.SubFOp: _rounded("-", "sub"),
    AR.MulFOp: _binary("*"),
    AR.DivFOp: _binary("/"),
    AR.AddIOp: _wrapping("+"),
    AR.SubIOp: _wrapping("-"),
    AR.MulIOp: _wrapping("*"),
    AR.AndIOp: _binary("&"),
    AR.OrIOp: _binary("|"),
    AR.XOrIOp: _binary("^"),
    AR.NegFOp: lambda e, op: f"(-{e.expr(op.operand)})",
    AR.MaximumFOp: _call("kiln_maxf", "kiln_max"),
    AR.MinimumFOp: _call("kiln_minf", "kiln_min"),
    AR.MaxSIOp: lambda e, op: f"({e.expr(op.lhs)} > {e.expr(op.rhs)} ? {e.expr(op.lhs)} : {e.expr(op.rhs)})",
    AR.MinSIOp: lambda e, op: f"({e.expr(op.lhs)} < {e.expr(op.rhs)} ? {e.expr(op.lhs)} : {e.expr(op.rhs)})",
    AR.CmpFOp: _cmpf,
    AR.CmpIOp: lambda e, op: f"({e.expr(op.lhs)} {_INT_COMPARE[op.predicate]} {e.expr(op.rhs)})",
    AR.SelectOp: lambda e, op: f"({e.expr(op.condition)} ? {e.expr(op.true_value)} : {e.expr(op.false_value)})",
    AR.ExtFOp: _cast,
    AR.TruncFOp: _cast,
    AR.SIToFPOp: _cast,
    AR.UIToFPOp: _cast,
    AR.ExtSIOp: _cast,
    AR.ExtUIOp: _cast,
    AR.TruncIOp: _cast,
    AR.FPToSIOp: _fptosi,
    M.ExpOp: _call("expf", "exp"),
    M.LogOp: _call("logf", "log"),
    M.SqrtOp: _call("sqrtf", "sqrt"),
    M.TanhOp: _call("tanhf", "tanh"),
    M.SinOp: _call("sinf", "sin"),
    M.CosOp: _call("cosf", "cos"),
    M.AbsFOp: _call("fabsf", "fabs"),
    M.PowFOp: _call("powf", "pow"),
    M.AbsIOp: _absi,
    M.IPowIOp: lambda e, op: f"({C_TYPES[op.result.type.name]})kiln_ipow({e.expr(op.lhs)}, {e.expr(op.rhs)})",
}
