"""The generated CPython entry of a compiled signature (runtime/cpython_entry.py): it is
the call path of plain arrays where the interpreter allows, its results are numpy's, it
keeps reference counts balanced, applies the thread count in any calling thread, and
leaves every call it cannot prove to the Python path. (tests/test_jit_plain_call.py runs
the fast path's semantics both with the entry and without it.)"""

import ctypes
import gc
import sys
import sysconfig
import threading
import weakref

import numpy as np
import pytest

import kiln
from kiln import plain_call
from kiln.runtime import cpython_entry, threads

CPYTHON = sys.implementation.name == "cpython" and not sysconfig.get_config_var("Py_GIL_DISABLED")


def entered(f, *args):
    """Call `f` twice (the checked path registers the signature, the second call enters it)
    and return the entry the next call tries first."""
    f(*args)
    f(*args)
    return f._plain_calls.entry


@pytest.mark.skipif(not CPYTHON, reason="the entry is made only on CPython with the GIL")
def test_the_layout_is_read_back_and_the_entry_is_native_code():
    assert cpython_entry._numpy_layout() is not None
    f = kiln.compile(lambda x, y: x * y + 1)
    x, y = np.arange(5, dtype=np.float32), np.full(5, 3, np.float32)
    assert type(entered(f, x, y)).__name__ == "builtin_function_or_method"
    np.testing.assert_array_equal(f(x, y), x * y + 1)


@pytest.mark.skipif(not CPYTHON, reason="reference counts are CPython's")
def test_reference_counts_stay_balanced_on_hits_and_misses():
    f = kiln.compile(lambda x: (x + 1, x.sum()))
    x = np.arange(7, dtype=np.float64)
    view = np.arange(14, dtype=np.float64)[::2]
    entered(f, x)

    def counts():
        gc.collect()  # the checked path's garbage cycles hold the view for a while
        return sys.getrefcount(x), sys.getrefcount(view), sys.getrefcount(plain_call.MISS)

    before = counts()
    for _ in range(200):
        result = f(x)
        f(view)  # a miss: the entry returns MISS, the checked path copies the view
    assert counts() == before
    np.testing.assert_array_equal(result[0], x + 1)
    assert type(result[1]) is np.float64 and result[1] == 21.0
    array = weakref.ref(result[0])
    del result
    gc.collect()
    assert array() is None  # nothing else holds a result


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param(lambda x: x[::-1], id="reversed"),
        pytest.param(lambda x: x.astype(np.float64), id="another-dtype"),
        pytest.param(lambda x: np.frombuffer(b"\0" + x.tobytes(), np.float32, count=x.size, offset=1), id="unaligned"),
        pytest.param(lambda x: x.view(type("Sub", (np.ndarray,), {})), id="subclass"),
    ],
)
def test_arguments_the_entry_cannot_prove_take_the_python_path_and_match_numpy(odd):
    f = kiln.compile(lambda x: x * 2 - 1)
    x = np.array([0.5, -0.0, np.inf, np.nan, 3.0], np.float32)
    entered(f, x)
    got, want = f(odd(x)), np.asarray(odd(x)) * 2 - 1
    np.testing.assert_array_equal(got, want)
    assert type(got) is np.ndarray and got.dtype == want.dtype


def test_a_byte_swapped_array_gets_the_checked_paths_error():
    f = kiln.compile(lambda x: x * 2 - 1)
    x = np.arange(3, dtype=np.float32)
    entered(f, x)
    with pytest.raises(kiln.DTypeError, match="byte order"):
        f(x.astype(">f4"))


def test_a_wrong_argument_count_is_the_checked_paths_error():
    f = kiln.compile(lambda x, y: x + y)
    x = np.ones(3, np.float32)
    entered(f, x, x)
    with pytest.raises(TypeError):
        f(x)
    with pytest.raises(TypeError):
        f(x, x, x)


def test_a_failing_status_raises_the_index_error_through_the_entry():
    f = kiln.compile(lambda t, i: t[i])
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    entered(f, table, np.array([0, 3, -1]))
    with pytest.raises(kiln.OutOfBoundsError, match="7"):
        f(table, np.array([0, 7, 1]))
    np.testing.assert_array_equal(f(table, np.array([2, -4])), table[[2, -4]])


def test_a_calling_thread_gets_the_process_thread_count():
    """The entry gives each calling thread the count (OpenMP keeps it per thread): a new thread
    that only ever calls through the entry runs with the count set last."""
    library = threads._library()
    if library is None:
        pytest.skip("libgomp is not installed")
    f = kiln.compile(lambda x: np.sqrt(x) + 1)
    x = np.linspace(0, 4, 9)
    entered(f, x)
    before = threads._count
    seen = []

    def call():
        f(x)
        seen.append(library.omp_get_max_threads())

    try:
        for count in (1, 3):
            threads.set_thread_count(count)
            worker = threading.Thread(target=call)
            worker.start()
            worker.join()
            assert seen[-1] == count
    finally:
        threads.set_thread_count(before)


def test_threads_calling_at_once_get_their_own_results():
    f = kiln.compile(lambda x: np.cumsum(x) * 0.5)
    inputs = [np.arange(1000, dtype=np.float64) * k for k in range(4)]
    entered(f, inputs[0])
    results = [None] * 4
    barrier = threading.Barrier(4)

    def work(k):
        barrier.wait()
        for _ in range(50):
            results[k] = f(inputs[k])

    workers = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for k in range(4):
        np.testing.assert_array_equal(results[k], np.cumsum(inputs[k]) * 0.5)


def test_without_a_checked_layout_calls_keep_the_python_path(monkeypatch):
    monkeypatch.setattr(cpython_entry, "_numpy_layout", lambda: None)
    f = kiln.compile(lambda x: x - x.mean())
    x = np.array([1.0, 2.0, 4.0])
    entry = entered(f, x)
    assert type(entry).__name__ == "method"
    np.testing.assert_array_equal(f(x), x - x.mean())


def test_a_dtype_without_numpys_own_descriptor_gets_no_entry():
    with_metadata = np.dtype(np.float32, metadata={"unit": "m"})
    assert cpython_entry.make_entry(0, [((3,), with_metadata)], [((3,), np.float32)], plain_call.MISS) is None
    assert cpython_entry.make_entry(0, [((3,), np.dtype(">f4"))], [((3,), np.float32)], plain_call.MISS) is None


def test_the_kernel_address_is_called_with_inputs_then_outputs():
    """The entry's contract with the kernel, checked with a C callback: one pointer per input,
    then one per output, the status returned."""
    seen = []

    @ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    def kernel(a, b, out):
        seen.append((a, b, out))
        ctypes.memmove(out, a, 8)
        return 0

    entry = cpython_entry.make_entry(
        ctypes.cast(kernel, ctypes.c_void_p).value,
        [((2,), np.dtype(np.int32)), ((1,), np.dtype(np.int8))],
        [((2,), np.dtype(np.int32))],
        plain_call.MISS,
        as_tuple=False,
    )
    if entry is None:
        pytest.skip("no entry on this interpreter")
    a, b = np.array([7, -9], np.int32), np.zeros(1, np.int8)
    out = entry(a, b)
    np.testing.assert_array_equal(out, a)
    assert seen == [(a.ctypes.data, b.ctypes.data, out.ctypes.data)]
    assert entry(a) is plain_call.MISS and entry(a, b.astype(np.int16)) is plain_call.MISS
    assert entry(a[::-1].copy()[::-1], b) is plain_call.MISS  # a reversed view
    assert len(seen) == 1


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda x: (x + 1,), id="1-tuple"),
        pytest.param(lambda x: (x.max(),), id="1-tuple-0d"),
        pytest.param(lambda x: [x * 2, x.min()], id="list"),
        pytest.param(lambda x: {"b": x - 1, "a": (x.sum(), x)}, id="dict"),
        pytest.param(lambda x: x.argmax(), id="0d"),
        pytest.param(lambda x: (x[:0], x[None]), id="empty-and-expanded"),
    ],
)
def test_results_keep_numpys_structure_and_types_through_the_entry(fn):
    f = kiln.compile(fn)
    x = np.array([3.0, -1.0, 7.5, 0.0])
    entered(f, x)
    got, want = f(x), fn(x)
    got_leaves, got_tree = kiln.frontend.pytree.flatten(got)
    want_leaves, want_tree = kiln.frontend.pytree.flatten(want)
    assert got_tree == want_tree and type(got) is type(want)
    for g, w in zip(got_leaves, want_leaves):
        assert type(g) is type(w)
        np.testing.assert_array_equal(g, w)


def test_a_structure_reader_takes_exactly_its_structure():
    """pytree.reader, the fast path's flatten: the leaves of a tree of the same structure and
    container types, in flatten's order; None for anything else."""
    import collections

    from kiln.frontend import pytree

    Pair = collections.namedtuple("Pair", "a b")
    tree = ({"w": 1, "b": [2, None, Pair(3, 4)]}, 5)
    leaves, treedef = pytree.flatten(tree)
    read = pytree.reader(treedef)
    assert read(tree) == leaves == [2, 3, 4, 1, 5]
    assert read(({"b": [6, None, Pair(7, 8)], "w": 9}, 0)) == [6, 7, 8, 9, 0]  # dict order is irrelevant
    for other in (
        [{"w": 1, "b": [2, None, Pair(3, 4)]}, 5],  # a list for the tuple
        ({"w": 1, "b": [2, None, (3, 4)]}, 5),  # a tuple for the namedtuple
        ({"w": 1, "b": [2, 0, Pair(3, 4)]}, 5),  # a leaf for None
        ({"w": 1, "c": [2, None, Pair(3, 4)]}, 5),  # another key
        ({"w": 1, "b": [2, None, Pair(3, 4)], "c": 0}, 5),  # one key more
        (collections.OrderedDict(w=1, b=[2, None, Pair(3, 4)]), 5),  # a dict subclass
        ({"w": 1, "b": [2, None]}, 5),  # a shorter list
        ({"w": 1, "b": [2, None, Pair(3, 4)]},),  # a shorter tuple
    ):
        assert read(other) is None, other


RACE = """
import threading, numpy as np, kiln
for trial in range(12):
    f = kiln.compile(lambda x: np.tanh(x) * 2)  # a new function each time: its first calls race
    x = np.ones((16, 16), np.float32)
    for count in (3, 2):
        barrier = threading.Barrier(count)
        def work():
            barrier.wait()
            for _ in range(20):
                assert np.array_equal(f(x), np.tanh(x) * 2)
        workers = [threading.Thread(target=work) for _ in range(count)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
print("done")
"""


def test_threads_registering_one_signature_at_once_keep_every_entry_alive():
    """Threads whose first calls of a signature meet each register a PlainCall, replacing one
    another's; an entry the others still call must own its code (it segfaulted when the
    PlainCall that made it was dropped). In a child process, so a crash is a failure."""
    import subprocess

    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", RACE], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0 and result.stdout.strip() == "done", result.stderr[-3000:]
