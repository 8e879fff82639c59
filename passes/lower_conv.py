"""Lower ``kiln.conv2d`` to a matrix product over a flattened, padded copy of the input.

A convolution is a matrix product: rows are output channels f, columns are output
positions, the reduction runs over input channels and kernel taps. kiln's matmul
schedule (as many rows jammed as the registers hold, 2 vectors of columns) runs such a
product near the FMA peak
when the columns are read contiguously, so the lowering lays the input out to make
them contiguous:

* the padded input of every image goes into one scratch row per channel (``panel``,
  (C, sh, sw, L)), images one after the other, so column q = n*Hq*Wq + oh*Wq + ow of
  the "wide" output reads the tap (kh, kw) at q + kh*Wq + kw: the same shift for every
  column, hence a contiguous vector for a vector of columns. The columns ow >= OW (the
  padding's width) are computed and thrown away, a fraction 1 - OW/Wq of the work;
  rows share their padding (Wq = W + pw) to keep that fraction small.
* a stride s splits each padded row and column into s phases (polyphase): phase
  (kh mod sh, kw mod sw) holds the rows and columns of that residue, so a strided
  convolution reads its taps at q + (kh div sh)*Wq + (kw div sw), contiguous again.

Before (``kiln.conv2d`` of a 1x2x7x7 input with a 4x2x3x3 weight, padding 1)::

    %0 = kiln.conv2d %x, %w {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}
        : (tensor<1x2x7x7xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x7x7xf32>

After (four loop nests; an image takes 8 x 8 columns, of which the 7 output rows' 56 are
computed, a whole number of 8-lane vectors, and the panel is long enough for the
furthest tap, 56 + 2*8 + 2)::

    %panel = memref.alloc() : memref<2x1x1x74xf32>      // zeros, then x at its padded place
    %wide = memref.alloc() : memref<4x56xf32>
    affine.for %f = 0 to 4 {
      affine.for %q = 0 to 56 {
        %s = affine.for %c = 0 to 2 iter_args(...) {    // the 9 taps written out:
          %p = affine.load %panel[%c, 0, 0, %q + 9]      // tap (1, 1): shift 1*8 + 1
          %v = affine.load %w[%f, %c, 1, 1] ...
        }
        affine.store %s, %wide[%f, %q]
      }
    }
    out[n, f, oh, ow] = wide[f, n*64 + oh*8 + ow]        // the last nest, for a returned result;
                                                         // an intermediate's readers load wide so

Where the thrown-away columns would be most of the work (a kernel nearly as large as
its input, as in the weight gradient's correlation), the convolution stays a direct
loop nest over the zero-padded input (``lower_direct``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kiln.dialects import memref as MR
from kiln.dialects import tensor as T
from kiln.dialects.affine_expr import Const, Dim, floordiv, mod
from kiln.dialects.types import MemRefType

from .affine_builder import View
from .scalar_rules import SCALAR_RULES, constant, reduction_identity

SCRATCH_OFFSET = "scratch_offset"  # the panel's byte offset in the arena, as the memory plan placed it
REDUCTION_MULTIPLE = 32  # lower_few_outputs' flat rows round up to whole pairs of 16-lane vectors
MAX_WASTE = 2.0  # flat layout only while it computes at most this many times the useful outputs
MAX_SMALL_OUTPUTS = 16  # lower_few_outputs keeps this many accumulators at most (in registers)


@dataclass(frozen=True)
class FlatLayout:
    """Where the flat lowering puts things, for an (N, C, H, W) input and a (KH, KW) kernel."""

    n: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    sh: int
    sw: int
    ph: int
    pw: int
    # Wide columns round up to a multiple of this: one vector of the target's (a column
    # loop's remainder would otherwise run scalar). Pairs of AVX-512 vectors (32) computed
    # 1.14-1.31 times the useful outputs on ResNet-50's 14x14 and 7x7 layers.
    multiple: int = 16

    # Neighbouring rows share their padding: a row's right padding is the next row's left
    # padding (and an image's bottom padding the next image's top), so a padded row holds
    # W + pw columns, not W + 2*pw: a tap that runs past a row's end reads the next row's
    # leading zeros. At 7x7 with padding 1 that is 64 columns per image instead of 81.
    @property
    def phase_rows(self) -> int:  # Hq: rows of one phase of one padded image
        return max(-(-(self.h + self.ph) // self.sh), self.out_rows)

    @property
    def phase_cols(self) -> int:  # Wq
        return max(-(-(self.w + self.pw) // self.sw), self.out_cols)

    @property
    def out_rows(self) -> int:
        return (self.h + 2 * self.ph - self.kh) // self.sh + 1

    @property
    def out_cols(self) -> int:
        return (self.w + 2 * self.pw - self.kw) // self.sw + 1

    @property
    def image(self) -> int:  # columns per image
        return self.phase_rows * self.phase_cols

    @property
    def columns(self) -> int:
        """Wide columns, rounded up: every image's rows, but the last image's only down to its
        last output row (its padding rows below would be computed and thrown away)."""
        used = (self.n - 1) * self.image + self.out_rows * self.phase_cols
        return -(-used // self.multiple) * self.multiple

    @property
    def panel_length(self) -> int:
        """The last column's furthest tap stays inside, and so does every input element (a
        row no tap reads, as when a stride skips the last rows, still has its place)."""
        reach = ((self.kh - 1) // self.sh) * self.phase_cols + (self.kw - 1) // self.sw
        return max(self.columns + reach, self.n * self.image)

    @property
    def waste(self) -> float:
        return self.columns / (self.n * self.out_rows * self.out_cols)


def flat_layout(op, multiple: int) -> FlatLayout | None:
    """The layout of `op`'s flat lowering with columns in multiples of `multiple`, or None
    where it is lowered otherwise (too many thrown-away columns, or no elements)."""
    (n, c, h, w), (_, _, kh, kw) = op.input.type.shape, op.weight.type.shape
    layout = FlatLayout(n, c, h, w, kh, kw, *op.stride, *op.padding, multiple)
    if 0 in op.input.type.shape + op.weight.type.shape or layout.waste > MAX_WASTE:
        return None
    return layout


def scratch_bytes(op, multiple: int) -> tuple:
    """(wide, panel): the bytes of the flat lowering's two buffers, (0, 0) where there is none."""
    g = flat_layout(op, multiple)
    if g is None:
        return 0, 0
    size = op.input.type.dtype.itemsize
    return op.weight.type.shape[0] * g.columns * size, g.c * g.sh * g.sw * g.panel_length * size


def planned_scratch_bytes(op) -> tuple:
    """What the memory plan reserves for `op`'s flat buffers: their bytes at 64-byte vectors
    (AVX-512), which every narrower vector's multiple divides, so the buffers fit at any width."""
    return scratch_bytes(op, 64 // op.input.type.dtype.itemsize)


def lower_conv2d(L, op) -> None:
    """Lower `op` (a ``T.Conv2DOp``) into `L` (a ``FunctionLowering``): the flat matrix
    product where it wastes little, else the direct nest."""
    lanes = max(L.vector_bits // (8 * op.input.type.dtype.itemsize), 1)
    layout = flat_layout(op, lanes)
    if 0 in op.input.type.shape + op.weight.type.shape:
        lower_direct(L, op)  # no elements to lay out (an empty batch, no channels): loops of 0 trips
    elif layout is not None:
        lower_flat(L, op, layout)
    elif (
        op.stride == (1, 1)
        and op.groups == 1
        and op.result.type.shape[2] * op.result.type.shape[3] <= MAX_SMALL_OUTPUTS
    ):
        lower_few_outputs(L, op)
    else:
        lower_direct(L, op)


def _scratch(L, shape, element):
    buffer = L.b.op(MR.AllocOp, result_type=MemRefType(tuple(shape), element))
    L.name_buffer(buffer)
    L.allocated.append(buffer)
    return buffer


def _planned(L, op, attribute: str, reserved: int, shape, element):
    """The buffer at the arena offset the memory plan recorded as `attribute` on `op`, where
    it reserved enough bytes (`reserved`) for `shape`; else a buffer of its own."""
    t = MemRefType(tuple(shape), element)
    offset = op.attributes.get(attribute)
    if offset is None or L.arena is None or t.size * t.dtype.itemsize > reserved:
        return _scratch(L, shape, element)
    buffer = L.arena_view(offset, t)
    L.name_buffer(buffer)
    return buffer


def _fill_zero(L, buffer) -> None:
    shape = buffer.type.shape
    with L.b.loops(shape) as ivs:
        L.b.store(constant(L.b, 0, buffer.type.element), buffer, [Dim(d) for d in range(len(shape))], ivs)


def _multiply_add(L, op, element, acc, x, w):
    product = SCALAR_RULES[T.MulOp](L.b, op, element, x, w)
    return SCALAR_RULES[T.AddOp](L.b, op, element, acc, product)


def lower_flat(L, op, g: FlatLayout) -> None:
    element = op.input.type.element
    f = op.weight.type.shape[0]
    wide_bytes, panel_bytes = planned_scratch_bytes(op)
    panel = _planned(L, op, SCRATCH_OFFSET, panel_bytes, (g.c, g.sh, g.sw, g.panel_length), element)
    if g.sh == g.sw == 1 and g.ph == g.pw == 0:
        # Unpadded and unstrided, the input fills columns 0 .. n*H*W - 1 of each channel's
        # row whole: only the columns past it (rounding, the taps' reach) need zeros.
        if g.panel_length > g.n * g.image:
            with L.b.loops((g.c, g.panel_length - g.n * g.image)) as ivs:
                zero = constant(L.b, 0, element)
                L.b.store(zero, panel, [Dim(0), Const(0), Const(0), Dim(1) + g.n * g.image], ivs)
    else:
        _fill_zero(L, panel)
    with L.b.loops(op.input.type.shape) as ivs:  # x[n, c, y, x] goes to its padded row and column's phase
        bn, ch, y, x = (Dim(d) for d in range(4))
        row, col = y + g.ph, x + g.pw
        place = bn * g.image + floordiv(row, g.sh) * g.phase_cols + floordiv(col, g.sw)
        value = L.b.load(L.views[op.input], [bn, ch, y, x], ivs)
        L.b.store(value, panel, [ch, mod(row, g.sh), mod(col, g.sw), place], ivs)
    if op.result in L.destinations:  # returned: computed here, then copied to the output
        wide = _scratch(L, (f, g.columns), element)
    else:  # the result's own place in the arena, which the plan sized for the wide columns
        wide = _planned(L, op, "arena_offset", wide_bytes, (f, g.columns), element)
    weight = L.views[op.weight]
    groups, per_group = op.groups, op.weight.type.shape[1]
    # Grouped: loops (group, filter in group, column), so that the last two are the matrix
    # product's rows and columns as for one group, and every index stays affine.
    shape = (f, g.columns) if groups == 1 else (groups, f // groups, g.columns)
    with L.b.loops(shape) as outer:
        init = constant(L.b, reduction_identity(T.ReduceSumOp, element), element)
        if groups == 1:
            row, q, ch = (Dim(d) for d in range(3))
            first = Const(0)
        else:
            group, inner, q, ch = (Dim(d) for d in range(4))
            row, first = group * (f // groups) + inner, group * per_group

        def step(rivs, accs):
            # The taps are written out, not looped over: each reads the panel at a constant
            # phase and shift, which the vectorizer sees as contiguous (a tap loop would put
            # mod and floordiv of its variable into the index).
            total = accs[0]
            for i in range(g.kh):
                for j in range(g.kw):
                    tap = q + (i // g.sh) * g.phase_cols + j // g.sw
                    place = [first + ch, Const(i % g.sh), Const(j % g.sw), tap]
                    xv = L.b.load(View.identity(panel), place, outer + rivs)
                    wv = L.b.load(weight, [row, ch, Const(i), Const(j)], outer + rivs)
                    total = _multiply_add(L, op, element, total, xv, wv)
            return [total]

        (total,) = L.b.reduction([per_group], [init], step)
        L.b.store(total, wide, [row, q], outer)
    bn, ch, y, x = (Dim(d) for d in range(4))
    result = View(wide, (ch, bn * g.image + y * g.phase_cols + x))  # out[n, f, y, x] in the wide columns
    if op.result not in L.destinations:
        # An intermediate is read where it lies, as a view (its consumers' loads index the
        # wide buffer): a copy to NCHW was a pass over memory per convolution, and the
        # BatchNorm, ReLU or residual add after it reads it anyway.
        L.views[op.result] = result
        return
    out = L.destination(op.result)
    with L.b.loops(op.result.type.shape) as ivs:
        L.b.store(L.b.load(result, [bn, ch, y, x], ivs), out, [bn, ch, y, x], ivs)


def lower_direct(L, op) -> None:
    """The convolution as its definition: for each output, a sum over (c, kh, kw) of the
    zero-padded input."""
    (sh, sw), (ph, pw) = op.stride, op.padding
    x_type = op.input.type
    element = x_type.element
    source = L.views[op.input]
    if ph or pw:  # zero-pad into a scratch buffer so the kernel below needs no bounds tests
        n, c, h, w = x_type.shape
        padded = _scratch(L, (n, c, h + 2 * ph, w + 2 * pw), element)
        _fill_zero(L, padded)
        with L.b.loops(x_type.shape) as ivs:
            value = L.b.load(source, [Dim(d) for d in range(4)], ivs)
            L.b.store(value, padded, [Dim(0), Dim(1), Dim(2) + ph, Dim(3) + pw], ivs)
        source = View.identity(padded)
    out = L.destination(op.result)
    with L.b.loops(op.result.type.shape) as outer:
        init = constant(L.b, reduction_identity(T.ReduceSumOp, element), element)
        bn, f, oh, ow, c, kh, kw = (Dim(d) for d in range(7))

        per_group = max(op.weight.type.shape[0] // op.groups, 1)  # no filters: a loop of 0 trips, any divisor
        first = floordiv(f, per_group) * op.weight.type.shape[1]  # f's group

        def step(rivs, accs):
            x = L.b.load(source, [bn, first + c, oh * sh + kh, ow * sw + kw], outer + rivs)
            w = L.b.load(L.views[op.weight], [f, c, kh, kw], outer + rivs)
            return [_multiply_add(L, op, element, accs[0], x, w)]

        (total,) = L.b.reduction(list(op.weight.type.shape[1:]), [init], step)
        L.b.store(total, out, [Dim(d) for d in range(4)], outer)


def lower_few_outputs(L, op) -> None:
    """A stride-1 convolution with at most MAX_SMALL_OUTPUTS outputs per (image, filter) and a
    kernel nearly as large as its input: the weight gradient's correlation (a 3x3 result of a
    56x56 "kernel"). Each image's padded channels go one after the other into one flat row
    (`panel`), and each filter's into a row of the same layout (`kernel`, zeros outside the
    kernel), so output (i, j) is one dot product along a flat row:
    out[n, f, i, j] = sum over t of panel[n, t + i*Wp + j] * kernel[f, t]. Every output has an
    accumulator of its own in that one reduction, so the input is read once and each
    accumulator is summed across its vector lanes once."""
    (n, c, h, w), (f, _, kh, kw) = op.input.type.shape, op.weight.type.shape
    (ph, pw), (oh, ow) = op.padding, op.result.type.shape[2:]
    element = op.input.type.element
    pitch, plane = w + 2 * pw, (h + 2 * ph) * (w + 2 * pw)
    total = -(-(c * plane) // REDUCTION_MULTIPLE) * REDUCTION_MULTIPLE
    reach = (oh - 1) * pitch + ow - 1
    panel = _scratch(L, (n, total + reach), element)
    _fill_zero(L, panel)
    with L.b.loops((n, c, h, w)) as ivs:
        bn, ch, y, x = (Dim(d) for d in range(4))
        value = L.b.load(L.views[op.input], [bn, ch, y, x], ivs)
        L.b.store(value, panel, [bn, ch * plane + (y + ph) * pitch + x + pw], ivs)
    kernel = _scratch(L, (f, total), element)
    _fill_zero(L, kernel)
    with L.b.loops((f, c, kh, kw)) as ivs:
        ff, ch, y, x = (Dim(d) for d in range(4))
        value = L.b.load(L.views[op.weight], [ff, ch, y, x], ivs)
        L.b.store(value, kernel, [ff, ch * plane + y * pitch + x], ivs)
    out = L.destination(op.result)
    spread = [(i, j) for i in range(oh) for j in range(ow)]
    # Two filters per step where the registers allow: each panel vector read then feeds two
    # multiply-adds (loads, not arithmetic, bound this kernel).
    pair = 2 if f % 2 == 0 and 2 * len(spread) <= 18 else 1
    with L.b.loops((n, f // pair)) as outer:
        init = constant(L.b, reduction_identity(T.ReduceSumOp, element), element)
        bn, fp, t = (Dim(d) for d in range(3))
        outputs = [(fp * pair + e, i, j) for e in range(pair) for (i, j) in spread]

        def step(rivs, accs):
            ks = [L.b.load(View.identity(kernel), [fp * pair + e, t], outer + rivs) for e in range(pair)]
            xs = [L.b.load(View.identity(panel), [bn, t + i * pitch + j], outer + rivs) for i, j in spread]
            return [
                _multiply_add(L, op, element, acc, xs[k % len(spread)], ks[k // len(spread)])
                for k, acc in enumerate(accs)
            ]

        totals = L.b.reduction([total], [init] * len(outputs), step)
        for value, (row, i, j) in zip(totals, outputs):
            L.b.store(value, out, [bn, row, Const(i), Const(j)], outer)
