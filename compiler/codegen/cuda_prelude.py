"""What every CUDA C source kiln writes begins with: the launch constants and C types,
and ``PRELUDE``, the C helpers the kernels call (numpy's float semantics where C's
differ, block-wide reductions, error checks) and the ``KILN_EMULATE``
definitions that let the same source compile as C++ for the CPU."""

from kiln.codegen.cuda_emulation import EMULATION
from kiln.codegen.status import STATUS

# THREADS_PER_BLOCK, THREADS_PER_BLOCK_MAX and KILN_WARP (which the kernels' launches
# depend on) are kiln.passes.gpu_launch's: the launch is decided there, before printing.
REDUCTION_BLOCKS = 1024  # enough to fill a GPU; the second level combines one partial per block in one block
REDUCTION_SHARE = 8  # elements a thread combines at least before the block tree, whose barriers it amortizes
CUDA_ERROR_BASE = 1000  # the host entry returns kiln's status codes as they are, CUDA's errors above this
C_TYPES = {
    "f16": "unsigned short",  # the IEEE 754 binary16 bits: __half does not exist in the host C++ build
    "f32": "float",
    "f64": "double",
    "i1": "bool",
    "i8": "signed char",  # also the arena's bytes
    "i16": "short",
    "i32": "int",
    "i64": "long long",
    "index": "long long",
}
STORED = dict(C_TYPES, i1="unsigned char")

PRELUDE = (
    r"""#include <math.h>
#include <stdint.h>
#ifdef KILN_EMULATE  /* plain C++ on the CPU: kiln.codegen.cuda_emulation */
"""
    + EMULATION
    + r"""#else
#define KILN_LAUNCH(kernel, blocks, threads, ...) kernel<<<(blocks), (threads)>>>(__VA_ARGS__)
#define KILN_LAUNCH_COOP KILN_LAUNCH3
#define KILN_SHARED(type, name, count) __shared__ type name[count];
#define KILN_LAUNCH3(kernel, gx, gy, gz, bx, by, bz, ...) \
    kernel<<<dim3((gx), (gy), (gz)), dim3((bx), (by), (bz))>>>(__VA_ARGS__)
#endif

#ifndef KILN_EMULATE
__device__ int kiln_status = 0;
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
/* arith.floordivsi: division rounding toward -inf, for divisors of either sign. */
__device__ static inline long long kiln_floordivsi(long long a, long long b) {
    long long q = a / b, r = a % b; return (r != 0 && (r ^ b) < 0) ? q - 1 : q; }
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
/* float16 <-> float and double, as numpy converts (npy_halfbits_to_floatbits, npy_floatbits_to_halfbits and
   their double forms): widening is exact and keeps a NaN's payload, even a signalling NaN's, which a float to
   double cast would quiet; narrowing rounds once, to nearest with ties to even, into the subnormals and to inf
   past 65504, and a NaN keeps its sign and the top bits of its payload, made nonzero. The other format is the
   bits in U, with E exponent and M fraction bits. kiln.codegen.llvm_half is the same in LLVM IR. */
template <typename To, typename From> __device__ static inline To kiln_bit_cast(From x) {
    To y; memcpy(&y, &x, sizeof y); return y; }
template <typename U, int E, int M> __device__ static inline U kiln_half_to_bits(unsigned short h) {
    const int bits = 1 + E + M, shift = M - 10, rebias = (1 << (E - 1)) - 1 - 15;
    const U one = 1, sign = (U)(h & 0x8000u) << (bits - 16);
    U magnitude = h & 0x7fffu;
    if (magnitude >= 0x7c00u) return sign | (((one << E) - 1) << M) | magnitude << shift;
    if (magnitude >= 0x0400u) return sign | ((magnitude << shift) + ((U)rebias << M));
    if (magnitude == 0) return sign;
    int lead = 0;  /* a subnormal half: its leading one moved up to the implicit bit's place */
    while (magnitude < 0x0400u) { magnitude <<= 1; lead++; }
    return sign | ((magnitude << shift) + ((U)(rebias - lead) << M)); }
template <typename U, int E, int M> __device__ static inline unsigned short kiln_bits_to_half(U u) {
    const int bits = 1 + E + M, shift = M - 10, bias = (1 << (E - 1)) - 1, min_normal = bias - 14;
    const U one = 1, fraction = u & ((one << M) - 1), magnitude = u & ((one << (bits - 1)) - 1);
    const unsigned sign = (unsigned)(u >> (bits - 16)) & 0x8000u;
    if (magnitude > (((one << E) - 1) << M)) {
        unsigned payload = (unsigned)(fraction >> shift);
        return (unsigned short)(sign | 0x7c00u | (payload ? payload : 1u)); }
    int exponent = (int)(magnitude >> M), amount = shift;
    U value = magnitude - ((U)(bias - 15) << M);
    if (exponent < min_normal) {  /* a subnormal half counts units of 2**-24; past M + 2 bits all rounds to 0 */
        value = fraction | (one << M);
        amount = min_normal - exponent + shift < M + 2 ? min_normal - exponent + shift : M + 2; }
    /* to nearest, ties to even; a carry into the exponent is the right result, up to inf */
    U rounded = (value + ((one << (amount - 1)) - 1) + ((value >> amount) & 1)) >> amount;
    return (unsigned short)(sign | (rounded < 0x7c00u ? (unsigned)rounded : 0x7c00u)); }
__device__ static inline float kiln_half_to_float(unsigned short h) {
    return kiln_bit_cast<float>(kiln_half_to_bits<uint32_t, 8, 23>(h)); }
__device__ static inline double kiln_half_to_double(unsigned short h) {
    return kiln_bit_cast<double>(kiln_half_to_bits<uint64_t, 11, 52>(h)); }
__device__ static inline unsigned short kiln_float_to_half(float x) {
    return kiln_bits_to_half<uint32_t, 8, 23>(kiln_bit_cast<uint32_t>(x)); }
__device__ static inline unsigned short kiln_double_to_half(double x) {
    return kiln_bits_to_half<uint64_t, 11, 52>(kiln_bit_cast<uint64_t>(x)); }
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
/* One step of a compensated (Kahan) sum: `*lost` carries what rounding dropped from `sum`
   and is taken back from the next term, so a thread's share of a long row sum stays within
   a few ulp however long it is. An infinity or NaN makes the compensation meaningless: it
   is dropped (set to 0), so the sum itself is inf or NaN as a plain sum would be. */
__device__ static inline float kiln_kahan_add(float sum, float x, float *lost) {
    float y = kiln_fsub(x, *lost), t = kiln_fadd(sum, y), l = kiln_fsub(kiln_fsub(t, sum), y);
    *lost = isfinite(l) ? l : 0.0f; return t; }
__device__ static inline double kiln_kahan_add(double sum, double x, double *lost) {
    double y = kiln_dsub(x, *lost), t = kiln_dadd(sum, y), l = kiln_dsub(kiln_dsub(t, sum), y);
    *lost = isfinite(l) ? l : 0.0; return t; }
/* Combine one value from every thread of the block; every thread gets the result, the same
   bits in each (the combines are commutative). Warp shuffles within each warp (a butterfly),
   then each thread folds the warps' results from shared memory in warp order, so the result
   does not depend on timing. Every thread of the block must call it (a barrier inside), and
   the block's size must be a multiple of KILN_WARP (full warps for the shuffles). */
#define KILN_WARP 32
template <typename T, T (*combine)(T, T)> __device__ static inline T kiln_block_allreduce(T v) {
    KILN_SHARED(T, warps, KILN_WARP)
    const unsigned linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned count = (blockDim.x * blockDim.y * blockDim.z + KILN_WARP - 1) / KILN_WARP;
    for (int k = KILN_WARP / 2; k >= 1; k /= 2) v = combine(v, __shfl_xor_sync(0xffffffffu, v, k));
    if (linear % KILN_WARP == 0) warps[linear / KILN_WARP] = v;
    __syncthreads();
    v = warps[0];
    for (unsigned w = 1; w < count; w++) v = combine(v, warps[w]);
    __syncthreads();  /* every thread has read warps[] before a next call writes it */
    return v; }
/* Integer maximum and minimum for the block trees of integer reductions; the type says
   whether they compare signed or unsigned. */
__device__ static inline int kiln_maxi(int a, int b) { return a > b ? a : b; }
__device__ static inline int kiln_mini(int a, int b) { return a < b ? a : b; }
__device__ static inline long long kiln_maxi(long long a, long long b) { return a > b ? a : b; }
__device__ static inline long long kiln_mini(long long a, long long b) { return a < b ? a : b; }
__device__ static inline unsigned kiln_maxi(unsigned a, unsigned b) { return a > b ? a : b; }
__device__ static inline unsigned kiln_mini(unsigned a, unsigned b) { return a < b ? a : b; }
__device__ static inline unsigned long long kiln_maxi(unsigned long long a, unsigned long long b) {
    return a > b ? a : b; }
__device__ static inline unsigned long long kiln_mini(unsigned long long a, unsigned long long b) {
    return a < b ? a : b; }
""".replace("KILN_NEGATIVE_POWER", str(STATUS["negative integer power"]))
)
