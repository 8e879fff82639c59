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
