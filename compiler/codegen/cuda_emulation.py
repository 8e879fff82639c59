"""The C++ that lets kiln's CUDA C run on the CPU (``target="cuda-emulate"``, built with
``-DKILN_EMULATE``): the CUDA names the kernels use, defined so that they mean what they
mean on a GPU.

- **Blocks run in parallel** on a few host threads (``KILN_EMULATE_THREADS``, default: the
  cores, at most 4), so the grid's blocks really are concurrent: a result that depends on
  their order, or a read-modify-write that should have been an atomic, can show up as a
  wrong answer.
- **Atomics are atomic**: ``atomicAdd``, ``atomicCAS``, ``atomicExch``, ``atomicMax`` and
  ``atomicMin`` are compare-and-swap loops on the host's atomics.
- **The threads of a cooperative block are fibres** (``KILN_LAUNCH_COOP``: kernels that use
  ``__syncthreads``, ``__shared__`` or warp shuffles). Each thread of the block is a
  ``ucontext`` fibre with its own stack; the block's scheduler runs every runnable fibre in
  turn until it reaches a barrier or ends. ``__syncthreads()`` waits for every thread of the
  block, a warp shuffle for every lane of its warp (it exchanges values through the block's
  slots). So a thread runs from one barrier to the next before the next thread starts, and
  a thread that reads shared memory another thread writes in the same phase (a missing
  barrier) reads the old contents: a wrong answer, not a pass by luck. The environment
  variable ``KILN_EMULATE_ORDER=reverse`` runs the threads (and picks the blocks) in reverse
  order, read at each launch; a test that passes in both orders does not depend on the
  order of threads between barriers.
- **A launch a GPU would refuse** (more than 1024 threads a block or 64 along z, a grid
  past 65535 along y or z, an empty grid or block) is refused: ``cudaGetLastError`` gives
  ``cudaErrorInvalidConfiguration``, as it would after the launch on a GPU.
- **A barrier that not every thread reaches** (a thread ended, or waits at another barrier)
  leaves the block deadlocked, which is undefined behaviour on a GPU; the emulation stops
  the block and the call fails with the "barrier divergence" status.
- ``__shared__`` variables are ``static thread_local``: one copy per host thread, which runs
  one block at a time, so each block sees one copy. Declared with ``KILN_SHARED(type, name,
  count)`` (what kiln's kernels use) the array is filled with 0xff bytes (NaN, or -1) when a
  block first reaches it, so a read of a slot no thread of the block has written gives that
  rather than what the previous block left there (the right answer, by luck, when two calls
  see the same data).
"""

from kiln.codegen.status import STATUS

EMULATION = r"""#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __shared__ static thread_local
/* Shared memory that starts each block filled with 0xff bytes (NaN, or -1): a thread that
   reads a slot no thread of its block has written yet reads that, not what the previous
   block (or call) left there, which can be the right answer by luck. */
static thread_local unsigned long long kiln_block_serial = 0;  /* which block this host thread runs */
#define KILN_SHARED(type, name, count) \
    static thread_local type name[count]; \
    static thread_local unsigned long long name##_block = 0; \
    if (name##_block != kiln_block_serial) { memset(name, 0xff, sizeof name); name##_block = kiln_block_serial; }
struct kiln_dim3 { unsigned x, y, z; };
static thread_local kiln_dim3 blockIdx, threadIdx, blockDim, gridDim;
typedef int cudaError_t;
#define cudaSuccess 0
static inline cudaError_t cudaMalloc(void **p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 2; }
static inline cudaError_t cudaFree(void *p) { free(p); return 0; }
/* A launch a GPU would refuse (CUDA's limits on the grid and the block) is refused here too,
   with the error cudaGetLastError gives there: cudaErrorInvalidConfiguration. */
static std::atomic<int> kiln_launch_error{0};
static inline cudaError_t cudaGetLastError(void) { return kiln_launch_error.exchange(0); }
static inline cudaError_t cudaDeviceSynchronize(void) { return 0; }
static std::atomic<int> kiln_status{0};  /* set by kernels on several host threads */
#define KILN_READ_STATUS(dst) ((dst) = kiln_status.exchange(0), cudaSuccess)

/* -- atomics: compare-and-swap loops on the value's bits ---------------------------------- */
template <typename T> struct kiln_word { typedef T type; };
template <> struct kiln_word<float> { typedef uint32_t type; };
template <> struct kiln_word<double> { typedef uint64_t type; };
template <typename T, typename F> static inline T kiln_atomic_update(T *address, F update) {
    typedef typename kiln_word<T>::type W;
    W *word = (W *)address, old = __atomic_load_n(word, __ATOMIC_SEQ_CST), next;
    do { T value, changed; memcpy(&value, &old, sizeof value); changed = update(value); memcpy(&next, &changed, sizeof next); }
    while (!__atomic_compare_exchange_n(word, &old, next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    T before; memcpy(&before, &old, sizeof before); return before; }
/* CUDA's own overloads only, so that what builds here builds with nvcc. */
#define KILN_ATOMIC_ADD(T) static inline T atomicAdd(T *a, T v) { return kiln_atomic_update(a, [v](T x) { return (T)(x + v); }); }
KILN_ATOMIC_ADD(int) KILN_ATOMIC_ADD(unsigned) KILN_ATOMIC_ADD(unsigned long long) KILN_ATOMIC_ADD(float) KILN_ATOMIC_ADD(double)
#define KILN_ATOMIC_PICK(name, T, pick) \
    static inline T name(T *a, T v) { return kiln_atomic_update(a, [v](T x) { return pick; }); }
#define KILN_ATOMIC_MAX_MIN(T) KILN_ATOMIC_PICK(atomicMax, T, x > v ? x : v) KILN_ATOMIC_PICK(atomicMin, T, x < v ? x : v)
KILN_ATOMIC_MAX_MIN(int) KILN_ATOMIC_MAX_MIN(unsigned) KILN_ATOMIC_MAX_MIN(long long) KILN_ATOMIC_MAX_MIN(unsigned long long)
#define KILN_ATOMIC_EXCH(T) KILN_ATOMIC_PICK(atomicExch, T, ((void)x, v))
KILN_ATOMIC_EXCH(int) KILN_ATOMIC_EXCH(unsigned) KILN_ATOMIC_EXCH(unsigned long long) KILN_ATOMIC_EXCH(float)
#define KILN_ATOMIC_CAS(T) static inline T atomicCAS(T *a, T compare, T v) { \
    __atomic_compare_exchange_n(a, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return compare; }
KILN_ATOMIC_CAS(int) KILN_ATOMIC_CAS(unsigned) KILN_ATOMIC_CAS(unsigned long long) KILN_ATOMIC_CAS(unsigned short)

/* -- a cooperative block: its threads as fibres ------------------------------------------- */
enum { KILN_RUNNABLE, KILN_WAITING, KILN_ENDED };
struct kiln_fibre { ucontext_t context; kiln_dim3 index; int state; };
struct kiln_block {
    std::vector<kiln_fibre> fibres;
    std::vector<std::unique_ptr<char[]>> stacks;
    std::vector<unsigned> arrived;      /* [0]: the block's barrier; [1 + w]: warp w's */
    std::vector<uint64_t> slots;        /* one per thread: the values a warp shuffle exchanges */
    ucontext_t scheduler;
    unsigned current = 0;
    void (*call)(void *) = nullptr;  /* the launch's kernel call and its arguments */
    void *arguments = nullptr;
};
static thread_local kiln_block *kiln_running_block = nullptr;  /* the block this host thread runs as fibres */
enum { KILN_FIBRE_STACK = 256 * 1024 };

static void kiln_fibre_main(void) {
    kiln_block *b = kiln_running_block;
    b->call(b->arguments);
    b->fibres[b->current].state = KILN_ENDED;  /* then back to the scheduler: uc_link */
}

/* Wait until all `n` threads of a group (the block, or a warp: threads first .. first + n - 1)
   have arrived at its barrier. */
static void kiln_group_wait(unsigned group, unsigned first, unsigned n) {
    kiln_block *b = kiln_running_block;
    if (b == nullptr) { kiln_status = KILN_DIVERGENCE; return; }  /* a barrier in a launch that is not cooperative */
    kiln_fibre &self = b->fibres[b->current];
    self.state = KILN_WAITING;
    if (++b->arrived[group] == n) {
        b->arrived[group] = 0;
        for (unsigned k = first; k < first + n; k++) b->fibres[k].state = KILN_RUNNABLE;
    }
    swapcontext(&self.context, &b->scheduler);
    threadIdx = self.index;
}
static inline unsigned kiln_linear_thread(void) {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
static inline void __syncthreads(void) {
    kiln_group_wait(0, 0, blockDim.x * blockDim.y * blockDim.z); }
/* A warp shuffle: every lane puts its value in its slot, waits for its warp, reads the source
   lane's slot, and waits again so that no slot is overwritten before every lane has read. */
template <typename T> static inline T kiln_shuffle(T v, unsigned (*source)(unsigned, int), int amount) {
    kiln_block *b = kiln_running_block;
    if (b == nullptr) { kiln_status = KILN_DIVERGENCE; return v; }
    const unsigned linear = kiln_linear_thread(), total = blockDim.x * blockDim.y * blockDim.z;
    const unsigned first = linear / 32 * 32, width = total - first < 32 ? total - first : 32;
    memcpy(&b->slots[linear], &v, sizeof v);
    kiln_group_wait(1 + linear / 32, first, width);
    const unsigned lane = source(linear - first, amount);
    T result = v;  /* a source lane outside the warp gives the thread's own value, as on a GPU */
    if (lane < width) memcpy(&result, &b->slots[first + lane], sizeof result);
    kiln_group_wait(1 + linear / 32, first, width);
    return result; }
static inline unsigned kiln_lane_xor(unsigned lane, int mask) { return lane ^ (unsigned)mask; }
static inline unsigned kiln_lane_down(unsigned lane, int delta) { return lane + (unsigned)delta; }
static inline unsigned kiln_lane_up(unsigned lane, int delta) { return lane >= (unsigned)delta ? lane - delta : 32u; }
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int mask) { return kiln_shuffle(v, kiln_lane_xor, mask); }
template <typename T> static inline T __shfl_down_sync(unsigned, T v, int delta) { return kiln_shuffle(v, kiln_lane_down, delta); }
template <typename T> static inline T __shfl_up_sync(unsigned, T v, int delta) { return kiln_shuffle(v, kiln_lane_up, delta); }
template <typename T> static inline T __shfl_sync(unsigned, T v, int lane) {
    return kiln_shuffle(v, [](unsigned, int source) { return (unsigned)source; }, lane); }

static thread_local kiln_block kiln_fibre_pool;  /* reused by every cooperative block this host thread runs */
static void kiln_run_cooperative(void (*call)(void *), void *arguments, bool reverse) {
    kiln_block &b = kiln_fibre_pool;
    const unsigned total = blockDim.x * blockDim.y * blockDim.z;
    b.fibres.resize(total);
    while (b.stacks.size() < total) b.stacks.emplace_back(new char[KILN_FIBRE_STACK]);
    b.arrived.assign(1 + (total + 31) / 32, 0);
    b.slots.assign(total, 0);
    b.call = call;
    b.arguments = arguments;
    for (unsigned k = 0; k < total; k++) {
        kiln_fibre &f = b.fibres[k];
        f.index = {k % blockDim.x, k / blockDim.x % blockDim.y, k / (blockDim.x * blockDim.y)};
        f.state = KILN_RUNNABLE;
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = b.stacks[k].get();
        f.context.uc_stack.ss_size = KILN_FIBRE_STACK;
        f.context.uc_link = &b.scheduler;
        makecontext(&f.context, kiln_fibre_main, 0);
    }
    kiln_running_block = &b;
    for (bool ran = true; ran;) {
        ran = false;
        for (unsigned j = 0; j < total; j++) {
            const unsigned k = reverse ? total - 1 - j : j;
            if (b.fibres[k].state != KILN_RUNNABLE) continue;
            b.current = k;
            threadIdx = b.fibres[k].index;
            swapcontext(&b.scheduler, &b.fibres[k].context);
            ran = true;
        }
    }
    kiln_running_block = nullptr;
    for (unsigned k = 0; k < total; k++)
        if (b.fibres[k].state != KILN_ENDED) { kiln_status = KILN_DIVERGENCE; break; }
}

/* -- a launch: the grid's blocks over a few host threads ---------------------------------- */
/* `call(arguments)` runs the kernel in one thread: a lambda's body, called through a plain function
   pointer (std::function per launch site made the op table's build twice as slow). */
static void kiln_launch(kiln_dim3 grid, kiln_dim3 block, bool cooperative, void (*call)(void *), void *arguments) {
    const char *order = getenv("KILN_EMULATE_ORDER");
    const bool reverse = order != nullptr && strcmp(order, "reverse") == 0;
    const unsigned long long blocks = (unsigned long long)grid.x * grid.y * grid.z;
    const unsigned threads = block.x * block.y * block.z;
    if (blocks == 0 || threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
        grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        kiln_launch_error = 9;  /* cudaErrorInvalidConfiguration */
        return;
    }
    const char *limit = getenv("KILN_EMULATE_THREADS");
    /* kiln.runtime.cuda checks the variable before each call: 1 to 64 */
    const int asked = limit && *limit ? atoi(limit) : 0;
    unsigned workers = asked > 0 ? (unsigned)(asked < 64 ? asked : 64) : std::thread::hardware_concurrency();
    workers = workers < 1 ? 1 : workers > 4 && asked <= 0 ? 4 : workers;
    if (workers > blocks) workers = (unsigned)blocks;
    std::atomic<unsigned long long> next{0};
    auto work = [&]() {
        gridDim = grid;
        blockDim = block;
        for (unsigned long long n; (n = next.fetch_add(1)) < blocks;) {
            const unsigned long long k = reverse ? blocks - 1 - n : n;
            kiln_block_serial++;
            blockIdx = {(unsigned)(k % grid.x), (unsigned)(k / grid.x % grid.y), (unsigned)(k / ((unsigned long long)grid.x * grid.y))};
            if (cooperative) { kiln_run_cooperative(call, arguments, reverse); continue; }
            for (unsigned j = 0; j < threads; j++) {
                const unsigned t = reverse ? threads - 1 - j : j;
                threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
                call(arguments);
            }
        }
    };
    std::vector<std::thread> helpers;
    for (unsigned w = 1; w < workers; w++) helpers.emplace_back(work);
    work();
    for (auto &h : helpers) h.join();
}
#define KILN_EMULATED_LAUNCH(cooperative, kernel, gx, gy, gz, bx, by, bz, ...) do { \
    auto kiln_kernel_call = [&]() { kernel(__VA_ARGS__); }; \
    kiln_launch({(unsigned)(gx), (unsigned)(gy), (unsigned)(gz)}, {(unsigned)(bx), (unsigned)(by), (unsigned)(bz)}, \
                cooperative, [](void *c) { (*(decltype(kiln_kernel_call) *)c)(); }, &kiln_kernel_call); } while (0)
#define KILN_LAUNCH3(...) KILN_EMULATED_LAUNCH(false, __VA_ARGS__)
#define KILN_LAUNCH_COOP(...) KILN_EMULATED_LAUNCH(true, __VA_ARGS__)
#define KILN_LAUNCH(kernel, blocks, threads, ...) KILN_LAUNCH3(kernel, blocks, 1, 1, threads, 1, 1, __VA_ARGS__)
""".replace("KILN_DIVERGENCE", str(STATUS["barrier divergence"]))
