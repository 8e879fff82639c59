"""Every stage kiln prints is real MLIR: upstream mlir-opt parses and verifies it.
The affine stages (``affine``, ``scheduled``) in kiln's custom form, as registered
upstream dialects; the tensor stages (``tensor``, ``optimized``), whose ``kiln``
dialect is unknown upstream, in the generic form with ``--allow-unregistered-dialect``.
Loop and buffer names are attributes, so what mlir-opt prints back, with every SSA
value renumbered, still schedules and runs. Skipped, with the reason, where mlir-opt
is missing."""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from op_table import CASES

import kiln
from kiln.dialects import parse_ir, print_ir
from kiln.interpreters.affine_interpreter import run_affine
from kiln.interpreters.tensor_interpreter import run_function
from kiln.passes.kernels import extract, kernel_names, structural_hash
from kiln.passes.schedule import Schedule, apply_schedule

CANDIDATES = [os.environ.get("KILN_MLIR_OPT", ""), "/usr/lib/llvm-19/bin/mlir-opt", shutil.which("mlir-opt") or ""]
MLIR_OPT = next((path for path in CANDIDATES if path and os.access(path, os.X_OK)), None)
pytestmark = pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")


def mlir_opt(text: str, *flags):
    result = subprocess.run([MLIR_OPT, *flags, "-"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, f"mlir-opt rejected kiln's IR:\n{result.stderr}\n{text}"
    return result.stdout


# How each stage is handed to mlir-opt: kiln's custom form for the stages in upstream
# dialects, the generic form for those in kiln's own.
STAGE_FORMS = {
    "tensor": (True, ["--allow-unregistered-dialect"]),
    "optimized": (True, ["--allow-unregistered-dialect"]),
    "affine": (False, []),
    "scheduled": (False, []),
}


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_every_stage_is_accepted_by_mlir_opt(case):
    lowered = kiln.compile(case.fn).lower(*case.args)
    for stage, (generic, flags) in STAGE_FORMS.items():
        mlir_opt(lowered.text(stage, generic=generic), *flags)
    mlir_opt(print_ir(lowered.pipeline.codegen_module()))  # each kernel a private func.func, and its func.call


def renumbered(text: str, *flags) -> str:
    """`text` as mlir-opt prints it back: every SSA value renamed (%arg0, %0, %alloc, ...)."""
    out = mlir_opt(text, *flags, "--mlir-print-local-scope")
    assert not re.search(r"%(x|w|k\d)\b", out), "mlir-opt kept kiln's SSA names; the test would prove nothing"
    return out


def canonical(module) -> str:
    """The module's text with SSA names made positional."""
    names = {}
    return re.sub(r"%[A-Za-z0-9_$.]+", lambda m: names.setdefault(m[0], f"%v{len(names)}"), print_ir(module, False))


def test_a_schedule_applies_to_ir_whose_ssa_names_mlir_opt_replaced():
    """Schedules name loops (k0.i) and buffers (w, buf0) by attributes: after mlir-opt has
    renamed every SSA value, the same steps make the same loops, and the result is numpy's."""
    fn = lambda x, w: np.tanh(x @ w) @ w.T  # noqa: E731
    text = kiln.compile(fn).lower(kiln.f32[37, 29], kiln.f32[29, 48]).text("affine")
    schedule = Schedule(
        [
            ["tile", ["k0.i", "k0.j"], [8, 16]],
            ["vectorize", "k0.j.i", 8],
            ["cache_read", "k0.j.o", "w"],  # an argument
            ["parallel", "k0.i.o"],
            ["split", "k1.r", 8],
            ["cache_read", "k1.i", "buf0"],  # the intermediate tanh(x @ w), a view of the arena
            ["unroll", "k1.r.i", 4],
        ]
    )
    original, renamed = parse_ir(text), parse_ir(renumbered(text))
    apply_schedule(original, schedule, verify_each=True)
    apply_schedule(renamed, schedule, verify_each=True)
    assert canonical(renamed) == canonical(original)
    assert 'kiln.buffer = "buf0_tile"' in print_ir(renamed) and 'kiln.loop = "k1.r.i.u"' in print_ir(renamed)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((37, 29)).astype(np.float32), rng.standard_normal((29, 48)).astype(np.float32)
    (got,) = run_affine(renamed, [x, w])
    np.testing.assert_allclose(got, np.tanh(x.astype(np.float64) @ w) @ w.T, rtol=1e-5, atol=1e-5)


def test_kernels_and_their_hashes_survive_renumbering():
    """Tuning records find kernels by name and hash; neither depends on SSA names."""
    text = kiln.compile(lambda a, b: np.exp(a @ b).sum(axis=1)).lower(kiln.f32[9, 12], kiln.f32[12, 32]).text("affine")
    original, renamed = parse_ir(text), parse_ir(renumbered(text))
    names = kernel_names(original.body.ops[-1])
    assert len(names) >= 1 and kernel_names(renamed.body.ops[-1]) == names
    for kernel in names:
        a, b = extract(original.body.ops[-1], kernel), extract(renamed.body.ops[-1], kernel)
        assert structural_hash(a) == structural_hash(b)


def test_outlined_kernels_read_back_from_mlir_opt_compute_the_same():
    """mlir-opt checks each func.call against its private callee, and prints the calls in its
    short form (``call @f_k0(...)``), which kiln reads back."""
    fn = lambda x, w: np.exp(x @ w) / np.exp(x @ w).sum()  # noqa: E731
    lowered = kiln.compile(fn).lower(kiln.f32[6, 5], kiln.f32[5, 7])
    module = parse_ir(renumbered(print_ir(lowered.pipeline.codegen_module())))
    assert sum(op.name == "func.func" for op in module.body.ops) >= 2
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 7)).astype(np.float32)
    (got,) = run_affine(module, [x, w])
    e = np.exp(x.astype(np.float64) @ w)
    np.testing.assert_allclose(got, e / e.sum(), rtol=1e-5)


def test_the_tensor_stage_read_back_from_mlir_opt_computes_the_same():
    """The generic form mlir-opt prints back parses into the same program."""
    fn = lambda x, b: kiln.softmax(x * 2 + b).sum(axis=0)  # noqa: E731
    lowered = kiln.compile(fn).lower(kiln.f32[5, 7], kiln.f32[7])
    rng = np.random.default_rng(1)
    x, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    e = np.exp(x * 2.0 + b - (x * 2.0 + b).max(axis=1, keepdims=True))
    for stage in ("tensor", "optimized"):
        module = parse_ir(renumbered(lowered.text(stage, generic=True), "--allow-unregistered-dialect"))
        (got,) = run_function(module.body.ops[-1], [x, b])
        np.testing.assert_allclose(got, (e / e.sum(axis=1, keepdims=True)).sum(axis=0), rtol=1e-5)


def test_mlir_opt_lowers_kiln_affine_code_further():
    """A real consumer: upstream's own lowering of affine loops runs on kiln's output."""
    lowered = kiln.compile(lambda x, y: (x @ y).sum(axis=0)).lower(kiln.f32[7, 13], kiln.f32[13, 5])
    out = mlir_opt(lowered.text("affine"), "--lower-affine")
    assert "scf.for" in out and "affine.for" not in out


@pytest.mark.parametrize("size", [9, 17, 64, 169])
def test_bool_constants_of_every_size_pass_mlir_opt_and_come_back(size):
    """MLIR packs i1 hex data eight elements to a byte; a causal mask is the usual such constant."""
    side = int(np.sqrt(size)) if int(np.sqrt(size)) ** 2 == size else None
    mask = np.tril(np.ones((side, side), bool)) if side else np.arange(size) % 3 == 0
    fn = lambda x: np.where(mask, x, 0.0)  # noqa: E731
    lowered = kiln.compile(fn).lower(kiln.f32[mask.shape])
    for stage, (generic, flags) in STAGE_FORMS.items():
        mlir_opt(lowered.text(stage, generic=generic), *flags)
    x = np.arange(size, dtype=np.float32).reshape(mask.shape) + 1
    module = parse_ir(renumbered(lowered.text("tensor", generic=True), "--allow-unregistered-dialect"))
    (got,) = run_function(module.body.ops[-1], [x])
    np.testing.assert_array_equal(got, np.where(mask, x, 0.0))


def test_elided_constants_are_mlir_opts_own_form():
    """kiln's elided text is what mlir-opt prints with --mlir-elide-elementsattrs-if-larger, and it parses."""
    w = np.random.default_rng(0).standard_normal((40, 50)).astype(np.float32)
    lowered = kiln.compile(lambda x: np.tanh(x @ w)).lower(kiln.f32[3, 40])
    for stage, (generic, flags) in STAGE_FORMS.items():
        text = lowered.text(stage, generic=generic, elide_constants=100)
        assert "dense_resource<__elided__>" in text
        mlir_opt(text, *flags)
    full = lowered.text("affine", elide_constants=None)
    assert "dense_resource<__elided__>" in mlir_opt(full, "--mlir-elide-elementsattrs-if-larger=100")


@pytest.mark.parametrize(
    "fn,args",
    [
        # a vector read along q floordiv 56, q mod 56 of a reshaped array (the matmul recipe)
        (lambda x, w: w @ x.reshape(16, -1), (kiln.f32[1, 16, 56, 56], kiln.f32[12, 16])),
        # a convolution's readers loading its wide columns; a panel zeroed only past the input
        (lambda x, w: np.maximum(kiln.conv2d(x, w), 0) + 1, (kiln.f32[2, 4, 9, 9], kiln.f32[13, 4, 3, 3])),
    ],
    ids=["reshaped-matmul", "conv-read-in-place"],
)
def test_the_register_blocked_and_reshaped_stages_are_accepted_by_mlir_opt(fn, args):
    lowered = kiln.compile(fn).lower(*args)
    for stage, (generic, flags) in STAGE_FORMS.items():
        mlir_opt(lowered.text(stage, generic=generic), *flags)
    assert "affine.vector_load" in lowered.text("scheduled")
