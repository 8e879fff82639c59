"""The disk cache's key identifies a function by its traced IR, where a large constant stands as
the digest of its bytes: keys must still tell apart two functions that differ in one weight."""

import numpy as np

import kiln
from kiln.dialects.parser import parse_ir
from kiln.dialects.printer import format_dense, print_ir


def _key(weights):
    compiled = kiln.compile(lambda x: x @ weights)
    return compiled.lower(kiln.f32[2, 64]).pipeline.cache_key()


def test_functions_differing_in_one_element_of_a_large_constant_have_different_keys():
    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    changed = w.copy()
    changed[63, 63] = np.nextafter(changed[63, 63], np.float32(np.inf))
    assert _key(w) == _key(w.copy())
    assert _key(w) != _key(changed)


def test_a_digested_constant_prints_as_its_bytes_digest_and_only_when_asked():
    w = np.arange(100, dtype=np.float32)
    module = kiln.compile(lambda x: x + w).lower(kiln.f32[100]).pipeline.module("tensor")
    digested = print_ir(module, digest_constants=True)
    assert "sha256:" in digested and "0x" not in digested.split("dense<", 1)[1].split(">", 1)[0]
    plain = print_ir(module)
    assert format_dense(w).split(" : ")[0] in plain  # the hex blob, as MLIR prints it
    assert print_ir(parse_ir(plain)) == plain  # and it still reads back
