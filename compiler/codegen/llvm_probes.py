"""Cycle counters around regions of a function's top-level ops, for ``kiln profile``.

A probe reads the CPU's cycle counter (``llvm.readcyclecounter``: ``rdtsc`` on x86-64,
the virtual counter on AArch64) where a region starts and again where it ends, and adds
the difference to its slot of one global array, ``kiln_profile_ticks``, which the profiler
reads after its calls. The regions are given as ``{id(op): [(when, action, slot), ...]}``:
``when`` is ``"before"`` or ``"after"`` the op, ``action`` ``"start"`` or ``"stop"``. A read
costs tens of cycles, nothing measurable beside a kernel, so one compiled function times
every kernel at once::

    %t0 = call i64 @llvm.readcyclecounter()
    store i64 %t0, ptr %probe3.start
    call void @kiln_f.kernel3(...)
    %t1 = call i64 @llvm.readcyclecounter()
    %spent = sub i64 %t1, %t0             ; then added to kiln_profile_ticks[3]
"""

from __future__ import annotations

import llvmlite.ir as ir

I64 = ir.IntType(64)
TICKS = "kiln_profile_ticks"
# ``int64_t kiln_profile_now(void)``: the counter, read from Python to measure its rate.
NOW = "kiln_profile_now"


class Probes:
    def __init__(self, llvm_module, regions: dict):
        self.regions = regions
        slots = 1 + max(slot for marks in regions.values() for _, _, slot in marks)
        array = ir.ArrayType(I64, slots)
        self.ticks = ir.GlobalVariable(llvm_module, array, name=TICKS)
        self.ticks.initializer = ir.Constant(array, [0] * slots)
        self.counter = ir.Function(llvm_module, ir.FunctionType(I64, []), name="llvm.readcyclecounter")
        self.starts = {}  # slot -> the stack slot holding its start
        now = ir.Function(llvm_module, ir.FunctionType(I64, []), name=NOW)
        builder = ir.IRBuilder(now.append_basic_block("entry"))
        builder.ret(builder.call(self.counter, []))

    def before(self, e, op) -> None:
        self._mark(e, op, "before")

    def after(self, e, op) -> None:
        self._mark(e, op, "after")

    def _mark(self, e, op, when: str) -> None:
        for at, action, slot in self.regions.get(id(op), ()):
            if at != when:
                continue
            now = e.b.call(self.counter, [])
            if action == "start":
                if slot not in self.starts:
                    self.starts[slot] = e.alloca_builder.alloca(I64, name=f"probe{slot}.start")
                e.b.store(now, self.starts[slot])
            else:
                spent = e.b.sub(now, e.b.load(self.starts[slot]))
                total = e.b.gep(self.ticks, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), slot)])
                e.b.store(e.b.add(e.b.load(total), spent), total)
