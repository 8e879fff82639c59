"""Array constants in the LLVM IR: written as llvmlite would write them (but fast), and
read back by LLVM as the same bytes."""

import llvmlite.ir as ir
import numpy as np

import kiln
from kiln.codegen.llvm_codegen import escape_bytes


def test_escaped_bytes_are_what_llvmlite_writes_for_every_byte_value():
    rng = np.random.default_rng(0)
    for data in (b"", b"\0", b'"\\', bytes(range(256)), rng.integers(0, 256, 10_000, np.uint8).tobytes()):
        constant = ir.Constant(ir.ArrayType(ir.IntType(8), len(data)), bytearray(data))
        assert str(constant) == f'[{len(data)} x i8] c"{escape_bytes(data)}"'


def test_a_constant_holding_every_byte_value_computes_numpys_numbers():
    table = np.arange(256, dtype=np.uint8).reshape(16, 16)
    f = kiln.compile(lambda x: x + table.astype(np.int32))
    x = np.ones((16, 16), np.int32)
    np.testing.assert_array_equal(f(x), x + table.astype(np.int32))
