"""Op traits: facts about an op class, declared on the class and asked with ``has_trait``.

A pass that needs to know whether an op is elementwise, a view or a call into the math
library asks the op (``op.has_trait(ELEMENTWISE)``) instead of keeping its own tuple of
op classes, so a new op states each fact once, where it is defined::

    class ErfOp(ElementwiseOp):
        name = "kiln.erf"
        traits = frozenset({TRANSCENDENTAL})   # and, implied, TARGET_DEPENDENT_FLOAT

A class has the traits it declares, those of its base classes, and those they imply.
The traits follow MLIR's (``Elementwise``, ``ConstantLike``, ``ViewLikeOpInterface``,
``LoopLikeOpInterface``, ``AffineReadOpInterface``; mlir/include/mlir/IR/OpBase.td and
the interface .td files) and xDSL's ``traits`` class variable: each is one object, not
a class per trait, because none carries behaviour of its own (MLIR's traits that verify
something are, here, an op's ``verify``).
"""

from __future__ import annotations


class Trait:
    """One fact an op class may declare; `implies` are the traits that follow from it."""

    def __init__(self, name: str, doc: str, implies=()):
        self.name = name
        self.__doc__ = doc
        self.implies = tuple(implies)

    def closure(self) -> frozenset:
        """This trait and every trait it implies, directly or not."""
        found, stack = set(), [self]
        while stack:
            trait = stack.pop()
            if trait not in found:
                found.add(trait)
                stack.extend(trait.implies)
        return frozenset(found)

    def __repr__(self) -> str:
        return self.name


# -- tensor level ----------------------------------------------------------------
MOVES_ELEMENTS = Trait(
    "MovesElements",
    "Its result elements are operand elements (or constants) moved, selected or converted "
    "to another type, never computed with: float16 stays float16 through it (emulate_floats).",
)
ELEMENTWISE = Trait(
    "Elementwise",
    "Each result element is computed from the operands' elements at the same index only; "
    "operands and result have one shape (MLIR's Elementwise).",
)
REDUCTION = Trait(
    "Reduction",
    "Combines the elements along its `axes` attribute into one (kiln.reduce_sum, _max, _min).",
)
CONTRACTION = Trait(
    "Contraction",
    "Sums products over an axis the result does not have: loops of its own inside each "
    "result element (linalg's ContractionOpInterface: kiln.matmul).",
)
VIEW = Trait(
    "View",
    "Its result is its operand's elements at other indices, nothing computed: lowering "
    "reads through it and never materializes it (MLIR's ViewLikeOpInterface).",
    implies=(MOVES_ELEMENTS,),
)
CONSTANT_LIKE = Trait("ConstantLike", "Its result is known at compile time (MLIR's ConstantLike).")
TARGET_DEPENDENT_FLOAT = Trait(
    "TargetDependentFloat",
    "On floats, its bits depend on the target: its math library or its order of additions "
    "(a schedule's), so numpy's value is not the target's and it is never constant-folded.",
)
TRANSCENDENTAL = Trait(
    "Transcendental",
    "A call into the math library on floats (exp, log, tanh, ...): tens of cycles an element, "
    "each target within a few ulp of numpy.",
    implies=(TARGET_DEPENDENT_FLOAT,),
)

# -- any level -----------------------------------------------------------------------
TERMINATOR = Trait("Terminator", "Ends its block and runs nothing itself (MLIR's IsTerminator).")

# -- loop level --------------------------------------------------------------------
ALLOCATION = Trait(
    "Allocation",
    "Its result is a new buffer, overlapping no other (MLIR's MemoryEffects::Allocate: memref.alloc, memref.alloca).",
)
LOOP_LIKE = Trait("LoopLike", "A loop over a named induction variable (affine.for, affine.parallel).")
MEMORY_ACCESS = Trait(
    "MemoryAccess", "Reads or writes elements of a memref operand (at an affine index or a computed one)."
)
MEMORY_READ = Trait(
    "MemoryRead",
    "Reads a memref: affine.load, affine.vector_load and memref.load (MLIR's MemoryEffects::Read).",
    implies=(MEMORY_ACCESS,),
)
MEMORY_WRITE = Trait(
    "MemoryWrite",
    "Writes a memref: affine.store, affine.vector_store and memref.store (MLIR's MemoryEffects::Write).",
    implies=(MEMORY_ACCESS,),
)
AFFINE_MAPPED = Trait(
    "AffineMapped",
    "Reads loop induction variables through an affine `map` of its `indices` (the accesses, "
    "affine.apply): a schedule that splits or reorders a loop rewrites its map.",
)
AFFINE_ACCESS = Trait(
    "AffineAccess",
    "Reads or writes a memref at an affine index (its `map` of its `indices`).",
    implies=(MEMORY_ACCESS, AFFINE_MAPPED),
)
AFFINE_READ = Trait(
    "AffineRead",
    "Reads a memref at an affine index (affine.load, affine.vector_load).",
    implies=(AFFINE_ACCESS, MEMORY_READ),
)
AFFINE_WRITE = Trait(
    "AffineWrite",
    "Writes a memref at an affine index (affine.store, affine.vector_store).",
    implies=(AFFINE_ACCESS, MEMORY_WRITE),
)
