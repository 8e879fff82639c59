"""Threefry-2x32 with 20 rounds: the counter-based bit generator behind kiln.random.

Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3" (SC 2011),
the Random123 library's ``threefry2x32_R(20, ...)``, and JAX's ``threefry2x32``. A block is
a pure function of a 64-bit key and a 64-bit counter, written here in numpy's uint32
arithmetic (add with wrap-around, xor, shifts): on numpy arrays numpy computes it, on
traced arrays kiln records the same ops, so every target gives the same bits.
"""

from __future__ import annotations

import numpy as np

# Rotation constants of Threefry-2x32 (Random123's R_32x2_*), four rounds per key injection.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# Skein's key-schedule parity constant: the third key word is k0 ^ k1 ^ this.
_PARITY = 0x1BD11BDA


def _rotate_left(x, r: int):
    return (x << r) | (x >> (32 - r))


def threefry2x32(key0, key1, x0, x1):
    """Encrypt counters (x0, x1) under the key (key0, key1): two uint32 arrays of x0's shape.

    key0, key1: uint32 scalars (0-d); x0, x1: uint32 arrays of one shape, at least 1-d (numpy
    warns about wrap-around on scalars, never on arrays, and the wrap-around is the point).
    """
    ks = (key0, key1, key0 ^ key1 ^ np.uint32(_PARITY))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def random_bits(key, n: int):
    """`n` uint32 words for `key` (uint32[2]): Threefry of the counters 0..n-1, the first half
    of them in the first word of each block and the second half in the second, as JAX's
    ``threefry_2x32(key, iota(n))`` (an odd count is padded by one counter and trimmed)."""
    half = (n + 1) // 2
    counters = np.arange(2 * half, dtype=np.uint32)
    y0, y1 = threefry2x32(key[0], key[1], counters[:half], counters[half:])
    return np.concatenate([y0, y1])[:n]
