"""Bugs planted on purpose, for the tests that check kiln's tools find them."""

from kiln.dialects.affine_expr import AffineMap, Const
from kiln.passes import loop_transforms


def plant_split_without_partial_tiles(monkeypatch) -> None:
    """Make `split` forget that the last tile is partial: its inner loop always runs
    `factor` times, reading and writing past the end of the buffer."""
    split = loop_transforms.split

    def broken_split(loop, factor):
        outer, inner = split(loop, factor)
        inner.attributes["upper_map"] = AffineMap(inner.upper_map.num_dims, (Const(factor),))
        return outer, inner

    monkeypatch.setattr(loop_transforms, "split", broken_split)


def plant_cache_read_without_barrier(monkeypatch) -> None:
    """Make the GPU `cache_read` forget the barrier after its copy: a thread may then read
    its shared tile before the other threads have written their parts of it."""
    from kiln.dialects import gpu
    from kiln.passes import schedule

    stage = schedule.gpu_cache_read

    def without_barrier(loop, buffer_name, layout=None):
        tile = stage(loop, buffer_name, layout)
        first = next(op for op in loop.body.ops if isinstance(op, gpu.BarrierOp))
        loop.body.ops.remove(first)
        first.parent = None
        return tile

    monkeypatch.setattr(schedule, "gpu_cache_read", without_barrier)
