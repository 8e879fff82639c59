"""Native execution: the compile cache across processes, damaged entries,
argument checking before native code runs, and run-time errors."""

import glob
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import kiln

rng = np.random.default_rng(3)

SCRIPT = textwrap.dedent("""
    import numpy as np, kiln
    f = kiln.compile(lambda x, y: np.tanh(x @ y) + 1)
    x, y = np.arange(12.0).reshape(3, 4) / 10, np.ones((4, 5))
    assert np.allclose(f(x, y), np.tanh(x @ y) + 1)
    print("hit" if f.compilations[0].from_cache else "miss")
""")


def run_script(cache_dir):
    env = dict(os.environ, KILN_CACHE_DIR=str(cache_dir))
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)


def test_a_second_process_finds_the_compiled_code_on_disk(tmp_path):
    assert run_script(tmp_path).stdout.strip() == "miss"
    assert run_script(tmp_path).stdout.strip() == "hit"
    entries = glob.glob(str(tmp_path / "*" / "*.o"))
    assert len(entries) == 1 and not glob.glob(str(tmp_path / "*" / ".tmp-*"))


def test_processes_compiling_at_once_do_not_see_half_written_entries(tmp_path):
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path))
    procs = [
        subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, text=True) for _ in range(4)
    ]
    outputs = [p.communicate()[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs) and set(outputs) <= {"hit", "miss"}
    assert len(glob.glob(str(tmp_path / "*" / "*.o"))) == 1


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_a_damaged_cache_entry_is_detected_and_rebuilt(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    x = rng.standard_normal((5, 3))
    kiln.compile(lambda v: np.exp(v) * 2)(x)
    (entry,) = glob.glob(str(tmp_path / "*" / "*.o"))
    data = open(entry, "rb").read()
    damaged = {
        "truncate": data[: len(data) // 2],
        "flip": data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:],
        "empty": b"",
    }[damage]
    open(entry, "wb").write(damaged)
    again = kiln.compile(lambda v: np.exp(v) * 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(again(x), np.exp(x) * 2)
    assert not again.compilations[0].from_cache
    assert any("damaged" in str(w.message) for w in caught)
    assert open(entry, "rb").read() == data  # rebuilt, byte for byte


def test_an_unwritable_cache_warns_and_still_runs(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("KILN_CACHE_DIR", str(blocked))
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache"):
        assert kiln.compile(lambda v: v + 1)(np.zeros(2)).tolist() == [1, 1]


def test_non_contiguous_and_misaligned_inputs_are_copied_not_misread():
    f = kiln.compile(lambda a, b: a * 2 + b)
    base = rng.standard_normal((6, 8))
    a = base[::2, 1::3].T  # strided and transposed
    raw = np.zeros(8 * 6 + 1, np.uint8)[1:].view(np.float64)  # 8-byte floats at an odd address
    raw[:] = rng.standard_normal(6)
    b = raw.reshape(6, 1)[:3, 0]
    assert not b.flags.aligned
    np.testing.assert_array_equal(f(a, b), a * 2 + b)


def test_out_that_overlaps_an_input_gives_numpys_answer():
    f = kiln.compile(lambda v: v.T + 0)
    x = rng.standard_normal((4, 4))
    expected = x.T + 0
    result = f(x, out=x)
    assert result is x
    np.testing.assert_array_equal(x, expected)


def test_out_that_is_not_contiguous_is_written_correctly():
    f = kiln.compile(lambda v: v * 3)
    x = rng.standard_normal((3, 4))
    target = np.zeros((4, 3)).T
    f(x, out=target)
    np.testing.assert_array_equal(target, x * 3)


def test_empty_and_zero_dimensional_arrays():
    f = kiln.compile(lambda v, s: (v * s, v.sum(), s * 2))
    scaled, total, doubled = f(np.zeros((0, 3), np.float32), np.float32(2))
    assert scaled.shape == (0, 3) and total == 0 and doubled == 4 and doubled.dtype == np.float32


def test_negative_integer_power_raises_like_numpy():
    f = kiln.compile(lambda a, b: a**b)
    a, b = np.array([2, 3], np.int64), np.array([2, -1], np.int64)
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        a**b
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        f(a, b)
    np.testing.assert_array_equal(f(a, np.array([0, 5], np.int64)), [1, 243])


def test_float_to_int_casts_of_nan_and_infinity_are_defined():
    # numpy leaves these platform-defined (with a warning); kiln gives x86-64's answer, INT_MIN,
    # on every machine instead of LLVM's poison (test_exact_semantics.py compares with numpy).
    f = kiln.compile(lambda v: v.astype(np.int32))
    out = f(np.array([np.nan, np.inf, -np.inf, 1e20, -7.9]))
    assert out.tolist() == [-(2**31), -(2**31), -(2**31), -(2**31), -7]


def test_nan_propagates_through_max_and_maximum_as_in_numpy():
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    f = kiln.compile(lambda v: (v.max(axis=1), np.maximum(v, 2.0), v.min()))
    for got, want in zip(f(x), (x.max(axis=1), np.maximum(x, 2.0), x.min())):
        np.testing.assert_array_equal(got, want)


def test_repeated_calls_reuse_one_compilation():
    f = kiln.compile(lambda v: v + 1)
    for _ in range(3):
        f(np.zeros(4))
    f(np.zeros(5))
    assert len(f.compilations) == 2


def test_a_function_of_hundreds_of_arrays_calls_its_native_code():
    # A model with its weights as arguments passes one pointer per tensor: DenseNet-121 has
    # more than 600, past the arity cffi's C type parser takes.
    xs = [np.full(3, k, np.float32) for k in range(700)]
    compiled = kiln.compile(lambda xs: np.stack(xs).sum(axis=0))
    np.testing.assert_array_equal(compiled(xs), np.stack(xs).sum(axis=0))
    np.testing.assert_array_equal(compiled(xs), np.stack(xs).sum(axis=0))  # the fast path too
