"""Default schedules: what every kernel gets without tuning.

For each kernel: vectorize the loops that can be (legality decides: a loop
whose accesses move along contiguous memory), innermost first: elementwise
loops, reductions along the contiguous axis (with a vector accumulator) and,
where the innermost loop cannot be, an outer one (matmul along its columns,
its reduction over k carrying vectors); then run the outermost loop in
parallel if the kernel does enough work to pay for waking the thread pool.
``default_schedule(function, vector_bits=256, threads=False)`` (AVX2's 8 float32 lanes and
16 registers, no thread pool; the pass ``default-schedule{vector-bits=256 threads=false}``). Before::

    func.func @scale(%x: memref<4x20xf32>, %c: memref<f32>, %out0: memref<4x20xf32>) attributes {kiln.buffers = ["x", "c", "out0"]} {
      affine.for %k0.i = 0 to 4 {
        affine.for %k0.j = 0 to 20 {
          %0 = affine.load %x[%k0.i, %k0.j] : memref<4x20xf32>
          %1 = affine.load %c[] : memref<f32>
          %2 = arith.mulf %0, %1 : f32
          affine.store %2, %out0[%k0.i, %k0.j] : memref<4x20xf32>
        } {kiln.loop = "k0.j"}
      } {kiln.loop = "k0.i"}
      func.return
    }

After (``vectorize(k0.j, 8)``)::

    func.func @scale(%x: memref<4x20xf32>, %c: memref<f32>, %out0: memref<4x20xf32>) attributes {kiln.buffers = ["x", "c", "out0"]} {
      affine.for %k0.i = 0 to 4 {
        affine.for %k0.j = 0 to 2 {
          %0 = affine.vector_load %x[%k0.i, %k0.j * 8] : memref<4x20xf32>, vector<8xf32>
          %1 = affine.load %c[] : memref<f32>
          %2 = vector.broadcast %1 : f32 to vector<8xf32>
          %3 = arith.mulf %0, %2 : vector<8xf32>
          affine.vector_store %3, %out0[%k0.i, %k0.j * 8] : memref<4x20xf32>, vector<8xf32>
        } {kiln.loop = "k0.j"}
        affine.for %k0.j.tail = 0 to 4 {
          %4 = affine.load %x[%k0.i, %k0.j.tail + 16] : memref<4x20xf32>
          %5 = affine.load %c[] : memref<f32>
          %6 = arith.mulf %4, %5 : f32
          affine.store %6, %out0[%k0.i, %k0.j.tail + 16] : memref<4x20xf32>
        } {kiln.loop = "k0.j.tail"}
      } {kiln.loop = "k0.i"}
      func.return
    }
"""

from __future__ import annotations

from kiln.dialects import affine as A
from kiln.dialects import func as F
from kiln.dialects import memref as MR
from kiln.dialects import verify
from kiln.dialects.affine_expr import dims_of
from kiln.dialects.collection import collection_paused
from kiln.dialects.diagnostics import KilnError
from kiln.dialects.traits import LOOP_LIKE

from .loop_transforms import ScheduleError
from .pass_spec import Option, declare_pass, power_of_two_from
from .reduction_schedule import jam_vector_reductions
from .schedule import Schedule, apply_step, find_loop, kernels, trial_copy

# Operations a kernel executes (after vectorization: a vector op counts once) below which it
# stays on one thread. Waking the thread pool costs tens of microseconds, and far more where
# its threads have gone to sleep (a call between numpy calls, on a virtual machine: 50-250
# us measured here, bench/data_dependent.py), so a kernel must run for longer than that on
# one core for a second one to pay: 2**18 operations is some 50-100 us (a 1024 x 1024
# float32 negation is 3 * 2**17, and memory-bound). Counting scalar iterations before
# vectorization (as this did) sent 5 us kernels (a 256 KiB negation, a gather of 2560 rows)
# to the pool.
PARALLEL_MIN_WORK = 1 << 18


def default_schedule(function, vector_bits: int = 256, threads: bool = True, skip=(), registers: int = 16) -> Schedule:
    """Choose and apply a schedule to `function` (affine level); returns the steps applied.
    Kernels named in `skip` (``k0``, ...) are left alone. `vector_bits` and `registers` are
    the width and number of the target's vector registers (AVX2's by default: 256 bits, 16)."""
    with collection_paused():
        return _default_schedule(function, vector_bits, threads, skip, registers)


@declare_pass(
    "default-schedule",
    "schedule every CPU kernel as a function compiled without tuning gets it (vectorize, parallel)",
    Option(
        "vector-bits", int, 256, "the width of a vector register (kiln.compile: the host CPU's)", power_of_two_from(64)
    ),
    Option(
        "threads", bool, True, "run large kernels' outer loops in parallel (kiln.compile: when a thread pool exists)"
    ),
    Option(
        "vector-registers",
        int,
        16,
        "how many vector registers the target has (kiln.compile: the host CPU's; 32 with AVX-512)",
        power_of_two_from(8),
    ),
)
def default_schedule_pass(module, vector_bits: int = 256, threads: bool = True, vector_registers: int = 16):
    """default_schedule on each function of an affine-level module."""
    for function in module.body.ops:
        if isinstance(function, F.FuncOp):
            default_schedule(function, vector_bits, threads, registers=vector_registers)
    return module


def _default_schedule(function, vector_bits: int, threads: bool, skip, registers: int) -> Schedule:
    schedule = Schedule()
    done = {nest for nest in kernels(function) if A.kernel_of(nest) in skip}
    while True:  # steps can add nests (remainder loops): schedule those too
        pending = [nest for nest in kernels(function) if nest not in done]
        if not pending:
            break
        nest = pending[0]
        done.add(nest)
        before = set(kernels(function))
        if _matmul_recipe(function, nest, vector_bits, registers, schedule):
            # What the recipe made is scheduled, except remainder nests (rows left over).
            done.update(n for n in set(kernels(function)) - before if not A.loop_name(n).endswith(".tail"))
            continue
        for loop in vector_candidates(nest):
            name = A.loop_name(loop)
            lanes = vector_bits // (8 * _widest_element(loop))
            if loop.parent is None or lanes < 2 or not loop.constant_bounds or loop.upper < lanes:
                continue
            if _try(function, schedule, ("vectorize", name, lanes)):
                done.update(set(kernels(function)) - before)  # its vector and remainder loops
                if _contains_loops(loop):
                    jam_vector_reductions(function, name, vector_bits, schedule)
                    break  # an outer loop vectorized: the loops inside it are done
    # Each nest is one fork and join of its own, so each must pay for it alone: a kernel's
    # remainder nest (the two vectors left over from a 2492-vector loop) stays on one thread
    # beside a main nest that goes parallel.
    for nest in list(kernels(function)):
        name = A.loop_name(nest)
        if name.split(".")[0] in skip:
            continue
        if (
            threads
            and isinstance(nest, A.ForOp)
            and nest.constant_bounds
            and nest.upper >= 2
            and _work(nest) >= PARALLEL_MIN_WORK
        ):
            _try(function, schedule, ("parallel", name))
    return schedule


MATMUL_VECTORS = 2  # vectors of columns in a matmul's register block
MAX_MATMUL_ROWS = 8  # 8 x 2 vectors on AVX-512's 32 registers runs at the FMA peak


def matmul_rows(registers: int) -> int:
    """Rows of a matmul's register block (rows x MATMUL_VECTORS vectors of accumulators) on a
    machine with `registers` vector registers. Each k step also holds the vectors of B it
    loaded and one broadcast element of A, so rows * vectors + vectors + 1 must fit: 6 rows on
    AVX2's 16 (BLIS's 6x16 float32 kernel), 8 on 32. An 8-row block on 16 registers spills
    accumulators every k step: matmul ran at a third of the FMA peak (docs/benchmarks.md)."""
    fit = (registers - MATMUL_VECTORS - 1) // MATMUL_VECTORS
    return max(1, min(MAX_MATMUL_ROWS, fit))


def _matmul_recipe(function, nest, vector_bits, registers, schedule) -> bool:
    """For a kernel whose innermost result loop holds a reduction that cannot be vectorized
    along itself (a matmul: k strides down B's columns): jam `matmul_rows` rows into one k
    loop, put the column loop outside them, vectorize it, and jam 2 vectors, so each k step
    updates a rows x 2-vector block of accumulators held in registers; then pack each block
    of columns of B into a contiguous tile."""
    chain = root_chain(nest)
    if len(chain) < 2:
        return False
    rows, cols = chain[-2], chain[-1]
    inner = [op for op in cols.body.ops if isinstance(op, A.ForOp)]
    if len(inner) != 1 or not inner[0].inits or not rows.constant_bounds or not cols.constant_bounds:
        return False
    lanes = vector_bits // (8 * _widest_element(cols))
    if rows.upper < 2 or cols.upper < 1 or lanes < 2:  # no columns: nothing to block (an empty result)
        return False
    i, j = A.loop_name(rows), A.loop_name(cols)
    if cols.upper < lanes * MATMUL_VECTORS:
        return rows.upper >= MAX_MATMUL_ROWS and _narrow_matmul(function, i, j, min(lanes, cols.upper), schedule)
    # Fewer rows than a block (a few-row product, or the rows a block left over: 4 of 16
    # filters in blocks of 6) get a block of their own size: left to the vectorizer alone,
    # the 4-row remainder of a 16-filter convolution ran at 9% of the FMA peak.
    block_rows = min(matmul_rows(registers), rows.upper)
    # Columns outermost first, rows blocked inside them: the rows a block leaves over (4 of
    # 64 filters in blocks of 6) then run as a block of their own inside the same column
    # loop, on the same packed tile of B. Blocked first, the leftover rows made a nest of
    # their own that read B unpacked, column by column: 9% of the FMA peak.
    # The vectors are jammed last: a jam interleaves its copies op by op, so each row's
    # broadcast of A meets its two FMAs at once; jamming the rows last broadcast all six
    # rows before any FMA, and six broadcasts beside 12 accumulators spilled on 16 registers.
    steps = [("reorder", [j, i]), ("unroll_jam", i, block_rows)]
    if rows.upper % block_rows > 1:
        steps.append(("unroll_jam", f"{i}.tail", rows.upper % block_rows))
    steps += [("vectorize", j, lanes), ("unroll_jam", j, MATMUL_VECTORS)]
    if not _applies(function, steps):
        # B read along its rows (a @ b.T): pack each block of B's rows transposed, then as above.
        block = lanes * MATMUL_VECTORS
        panel = _row_reader(cols)
        # The same order as above, the block of columns in the role of j: leftover rows in
        # the packed column block (at M = 64, 19 GFLOP/s before, 72 after on Zen 3).
        steps = [("reorder", [j, i]), ("split", j, block), ("unroll_jam", i, block_rows)]
        if rows.upper % block_rows > 1:
            steps.append(("unroll_jam", f"{i}.tail", rows.upper % block_rows))
        steps += [
            ("cache_read", f"{j}.o", panel, [1, 0]),
            ("vectorize", f"{j}.i", lanes),
            ("unroll_jam", f"{j}.i", MATMUL_VECTORS),
        ]
        if panel is None or cols.upper % block or not _applies(function, steps):
            return False
        for step in steps:  # they applied to a verified copy (_applies)
            apply_step(function, step, atomic=False)
            schedule.add(*step)
        return True
    for step in steps:  # they applied to a verified copy (_applies)
        apply_step(function, step, atomic=False)
        schedule.add(*step)
    # Pack the column panel of B that each block of columns reads (when it has a name to refer to).
    panel = next(
        (MR.buffer_name(op.memref) for op in find_loop(function, f"{j}.u").walk() if isinstance(op, A.VectorLoadOp)),
        None,
    )
    if panel:
        _try(function, schedule, ("cache_read", f"{j}.u", panel))
    return True


def _narrow_matmul(function, i, j, columns: int, schedule) -> bool:
    """Few columns (a layer with 10 outputs): 8 rows jammed around one vector of the
    widest power of two that fits the columns (the rest run as a remainder loop); rows
    stay outermost, so the thread pool splits them. 8 accumulators, the loaded vector and
    the broadcast fit 16 registers."""
    width = 1 << (columns.bit_length() - 1)
    steps = [("unroll_jam", i, MAX_MATMUL_ROWS), ("vectorize", j, width)]
    if width < 4 or not _applies(function, steps):
        return False
    for step in steps:  # they applied to a verified copy (_applies)
        apply_step(function, step, atomic=False)
        schedule.add(*step)
    return True


def _applies(function, steps) -> bool:
    """Whether `steps` apply to a copy of `function` and leave valid IR. The steps act on one
    kernel (a recipe's loops are one nest's), so the copy holds only that kernel, as a single
    step's trial does: copying the whole function per recipe made scheduling quadratic in the
    number of kernels (ShuffleNet's 200-odd took minutes)."""
    trial = trial_copy(function, steps[0])
    try:
        for step in steps:
            apply_step(trial, step, atomic=False)  # the copy is thrown away, whole or not
        verify(trial)
    except KilnError:
        return False
    return True


def _row_reader(cols):
    """The name of the 2-d buffer the column loop reads along its first dimension (B of a @ b.T)."""
    iv = cols.induction_variable
    for op in cols.walk():
        if isinstance(op, A.LoadOp) and op.memref.type.rank == 2 and iv in op.indices:
            if op.indices.index(iv) in dims_of(op.map.results[0]):
                return MR.buffer_name(op.memref)
    return None


def root_chain(nest) -> list:
    """The loops over a kernel's result: perfectly nested, no iter_args."""
    chain = [nest] if isinstance(nest, A.ForOp) and not nest.inits else []
    while chain:
        body = [op for op in chain[-1].body.ops if not isinstance(op, A.YieldOp)]
        loops = [op for op in body if isinstance(op, A.ForOp)]
        if len(loops) != 1 or loops[0].inits or len(body) != 1:
            break
        chain.append(loops[0])
    return chain


def _try(function, schedule, step) -> bool:
    try:
        apply_step(function, step)
    except ScheduleError:
        return False
    schedule.add(*step)
    return True


def vector_candidates(nest) -> list:
    """Loops that hold no other loop first (innermost), then the loops around them, inside out."""
    loops = [op for op in nest.walk() if isinstance(op, A.ForOp)]
    leaves = [l for l in loops if not _contains_loops(l)]
    others = [l for l in reversed(loops) if _contains_loops(l)]
    return leaves + others


def _contains_loops(loop) -> bool:
    return any(op.has_trait(LOOP_LIKE) for op in loop.walk() if op is not loop)


def _widest_element(loop) -> int:
    """The widest element the loop's accesses move through: vectors of it fill a register. An
    access that stays put in the loop (a gather's index, read once per row) stays a scalar, so
    its width does not count."""
    moving = {op.induction_variable for op in loop.walk() if isinstance(op, A.ForOp)}
    for op in loop.walk():  # positions computed from the loop variables (a gather's row offset)
        if isinstance(op, A.ApplyOp) and any(v in moving for v in op.operands):
            moving.add(op.result)
    accesses = (A.LoadOp, A.StoreOp, MR.LoadOp, MR.StoreOp)
    sizes = [
        op.memref.type.dtype.itemsize
        for op in loop.walk()
        if isinstance(op, accesses) and any(v in moving for v in op.indices)
    ]
    return max(sizes, default=4)


def _work(nest) -> int:
    """Operations a nest executes: each op of a loop body once per iteration, loops inside
    it by their own work (a vector op is one operation, as it is one instruction)."""
    body = 0
    for op in nest.body.ops:
        body += _work(op) if isinstance(op, (A.ForOp, A.ParallelOp)) else 1
    trips = nest.trip_count if isinstance(nest, A.ForOp) else nest.upper
    return max(trips, 0) * body
