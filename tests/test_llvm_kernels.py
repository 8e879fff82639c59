"""Each kernel (its consecutive top-level loop nests, which outline-kernels made a private
function) is an LLVM function of its own, called in its place, with the same numbers as
numpy's."""

import re

import numpy as np

import kiln


def llvm_ir(fn, *args) -> str:
    return fn.lower(*args).pipeline.llvm_ir()


def test_each_kernel_is_a_noinline_function_taking_the_arena_not_its_views():
    fn = kiln.compile(lambda x, w: np.tanh(np.exp(x) @ w) * 2)
    x = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((5, 9)).astype(np.float32)
    text = llvm_ir(fn, x, w)
    kernels = re.findall(r"define internal void @\"(kiln__lambda_\.kernel\d+)\"\((.*)\) noinline nounwind", text)
    assert len(kernels) >= 2, text
    for name, parameters in kernels:
        assert f'call void @"{name}"' in text
        # Every pointer parameter is a base: the status slot, an argument or the arena.
        assert parameters.count("noalias") == parameters.count("*"), parameters
    np.testing.assert_allclose(fn(x, w), np.tanh(np.exp(x) @ w) * 2, rtol=1e-5, atol=1e-6)


def test_a_nest_that_gives_a_value_stays_inline_and_its_reader_takes_the_value():
    fn = kiln.compile(lambda x: np.exp(x) / np.exp(x).sum())
    x = np.random.default_rng(2).standard_normal((7, 3)).astype(np.float32)
    text = llvm_ir(fn, x)
    main = text[text.index('define i32 @"kiln__lambda_"') :]
    main = main[: main.index("\n}")]
    assert "phi  float" in main  # the sum's loop, inline
    assert re.search(r"call void @\"kiln__lambda_\.kernel\d+\"\(.*float %", main)
    np.testing.assert_allclose(fn(x), np.exp(x) / np.exp(x).sum(), rtol=1e-5)


def test_a_kernels_vector_loop_and_its_remainder_share_one_function():
    fn = kiln.compile(lambda x: np.sin(x) * 3)
    x = np.linspace(-4, 4, 1003, dtype=np.float32)  # 1003 = 125 * 8 + 3: a scalar remainder nest
    lowered = fn.lower(x)
    nests = [op for op in lowered.module("scheduled").body.ops[-1].body.ops if op.name == "affine.for"]
    assert len(nests) == 2, lowered.text("scheduled")
    text = lowered.pipeline.llvm_ir()
    assert len(re.findall(r"define internal void @\"kiln__lambda_\.kernel\d+\"", text)) == 1, text
    np.testing.assert_allclose(fn(x), np.sin(x) * 3, rtol=1e-6)
