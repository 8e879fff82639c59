"""DLPack both ways: kiln's DeviceArrays export their memory to numpy and PyTorch without copies
(and stay alive while a consumer holds them), and compiled functions take PyTorch tensors
without copying them when they are already C-contiguous of the compiled dtype."""

import gc
import subprocess
import sys
import weakref

import numpy as np
import pytest
from targets import NEEDS_GPU, gpu_missing

import kiln
from kiln import executable
from kiln.runtime import dlpack


def emulated(values):
    return kiln.to_device(np.asarray(values), target="cuda-emulate")


def test_an_emulated_device_array_is_host_memory_numpy_shares():
    device = emulated(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert device.__dlpack_device__() == (1, 0)  # kDLCPU
    view = np.from_dlpack(device)
    assert (view.shape, view.dtype) == ((2, 3), np.float32)
    view[1, 2] = -1.0  # write through numpy, read through kiln
    np.testing.assert_array_equal(device.numpy(), [[0, 1, 2], [3, 4, -1]])
    again = np.from_dlpack(device)
    assert np.shares_memory(view, again)
    np.testing.assert_array_equal(again, view)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_every_dtype_kiln_computes_crosses_unchanged(dtype):
    values = (np.arange(5) % 2).astype(dtype)
    np.testing.assert_array_equal(np.from_dlpack(emulated(values)), values)
    assert np.from_dlpack(emulated(values)).dtype == dtype


def test_the_device_array_lives_while_a_consumer_holds_its_memory():
    device = emulated(np.arange(4.0))
    alive = weakref.ref(device)
    view = np.from_dlpack(device)
    del device
    gc.collect()
    assert alive() is not None  # the consumer's view keeps the memory's owner alive
    np.testing.assert_array_equal(view, np.arange(4.0))
    del view
    gc.collect()
    assert alive() is None  # and lets go of it when done


def test_a_capsule_dropped_unconsumed_lets_go_of_the_array():
    device = emulated(np.arange(3.0))
    alive = weakref.ref(device)
    capsule = device.__dlpack__()
    del device
    gc.collect()
    assert alive() is not None
    del capsule
    gc.collect()
    assert alive() is None


class Owner:
    """Stands for the object that owns exported memory."""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_capsule_a_consumer_refuses_still_lets_go_of_its_owner():
    # numpy refuses CUDA memory after taking the capsule, and frees it with its error pending.
    values, owner = np.arange(3.0), Owner()
    alive = weakref.ref(owner)

    class OnTheGpu:
        def __init__(self, owner):
            self.owner = owner

        def __dlpack__(self, **kwargs):
            return dlpack.export(values.ctypes.data, values.shape, values.dtype, (dlpack.CUDA, 0), self.owner)

        def __dlpack_device__(self):
            return (dlpack.CUDA, 0)

    with pytest.raises(Exception):
        np.from_dlpack(OnTheGpu(owner))
    del owner
    gc.collect()
    assert alive() is None


def test_copies_and_other_devices_are_asked_for_explicitly():
    device = emulated(np.arange(3.0))
    copied = np.from_dlpack(device, copy=True)
    assert not np.shares_memory(copied, np.from_dlpack(device))
    np.testing.assert_array_equal(copied, np.arange(3.0))
    with pytest.raises(BufferError, match=r"cannot be exported to \(2, 0\)"):
        device.__dlpack__(dl_device=(2, 0))


def test_from_dlpack_views_host_arrays_and_refuses_other_objects():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1:]
    view = kiln.from_dlpack(a)
    assert np.shares_memory(view, a) and view.strides == a.strides
    with pytest.raises(kiln.ArgumentError, match="takes an object with __dlpack__, got a value of type list"):
        kiln.from_dlpack([1.0, 2.0])


class CudaProducer:
    """A DLPack producer whose memory claims to be on a GPU."""

    def __init__(self):
        self.asked = False

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        self.asked = True
        return np.zeros(3).__dlpack__()


@pytest.mark.skipif(gpu_missing() is None, reason="a GPU is here: CUDA memory can be taken")
def test_cuda_memory_without_a_gpu_is_refused_before_the_capsule_is_taken():
    producer = CudaProducer()
    with pytest.raises(kiln.CudaUnavailable, match="kiln.from_dlpack: a CudaProducer in CUDA memory"):
        kiln.from_dlpack(producer)
    assert not producer.asked


@NEEDS_GPU
def test_gpu_device_arrays_cross_dlpack_as_cuda_memory():
    device = kiln.to_device(np.arange(6, dtype=np.float32))
    assert device.__dlpack_device__()[0] == 2  # kDLCUDA
    taken = kiln.from_dlpack(device)
    assert isinstance(taken, kiln.DeviceArray) and taken.pointer == device.pointer
    np.testing.assert_array_equal(taken.numpy(), np.arange(6, dtype=np.float32))
    double = kiln.compile(lambda x: x * 2.0, target="cuda")
    np.testing.assert_array_equal(double(taken).numpy(), np.arange(6, dtype=np.float32) * 2)


# PyTorch, where it is installed.


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed: its DLPack exchange is not checked")


@pytest.fixture
def native_inputs(monkeypatch):
    """The arrays each call hands to native code, as they are handed."""
    seen = []
    prepare = executable.prepare_input

    def spy(leaf, shape, dtype):
        seen.append(prepare(leaf, shape, dtype))
        return seen[-1]

    monkeypatch.setattr(executable, "prepare_input", spy)
    return seen


def test_torch_takes_an_emulated_device_array_without_a_copy(torch):
    device = emulated(np.arange(4, dtype=np.float32))
    tensor = torch.from_dlpack(device)
    assert tensor.data_ptr() == device.pointer
    tensor[0] = 9.0
    np.testing.assert_array_equal(device.numpy(), [9, 1, 2, 3])


def test_a_compiled_function_reads_a_torch_tensor_in_place(torch, native_inputs):
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    w = torch.ones(4, 2, dtype=torch.float32)
    f = kiln.compile(lambda x, w: np.maximum(x @ w - 10.0, 0))
    result = f(x, w)
    np.testing.assert_array_equal(result, np.maximum(x.numpy() @ w.numpy() - 10.0, 0))
    assert [a.ctypes.data for a in native_inputs] == [x.data_ptr(), w.data_ptr()]  # no copies
    compiled = f.lower(x, w).compile()
    native_inputs.clear()
    np.testing.assert_array_equal(compiled(x, w), result)
    assert [a.ctypes.data for a in native_inputs] == [x.data_ptr(), w.data_ptr()]
    view = kiln.from_dlpack(x)
    assert view.ctypes.data == x.data_ptr() and np.shares_memory(view, x.numpy())


def test_a_non_contiguous_torch_tensor_is_copied_and_computed_right(torch, native_inputs):
    x = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()  # a transposed view
    assert not x.is_contiguous()
    f = kiln.compile(lambda x: x.sum(axis=0) * 2.0)
    np.testing.assert_array_equal(f(x), x.numpy().sum(axis=0) * 2.0)
    assert native_inputs[0].flags.c_contiguous and native_inputs[0].ctypes.data != x.data_ptr()


def test_torch_tensors_kiln_cannot_take_are_refused_by_argument(torch):
    f = kiln.compile(lambda x, y: x + y)
    y = np.ones(3, np.float32)
    with pytest.raises(kiln.ArgumentError, match="argument 'x': kiln.from_dlpack cannot take this Tensor: .*detach"):
        f(torch.ones(3, requires_grad=True), y)
    with pytest.raises(
        kiln.ArgumentError, match="argument 'x': kiln.from_dlpack cannot take this Tensor: Unsupported dtype"
    ):
        f(torch.ones(3, dtype=torch.bfloat16), y)
    half = torch.tensor([1.5, -2.0, 65504.0], dtype=torch.float16)  # float16 comes in as numpy's float16
    np.testing.assert_array_equal(f(half, half), half.numpy() + half.numpy())
    compiled = f.lower(kiln.f32[3], kiln.f32[3]).compile()
    with pytest.raises(kiln.ArgumentError, match=r"argument 'x' is kiln.f64\[3\]; .* kiln.f32\[3\]"):
        compiled(torch.ones(3, dtype=torch.float64), y)


# Programs that leave DLPack views and capsules alive until the interpreter exits: their
# deleters then run while modules are being torn down, and must neither crash nor complain.
SHUTDOWN_PROGRAMS = {
    "view_in_sys": "d = kiln.to_device(np.arange(4, dtype=np.float32), target='cuda-emulate'); sys.keep = np.from_dlpack(d)",
    "views_in_a_global_list": (
        "views = [np.from_dlpack(kiln.to_device(np.arange(n, dtype=np.float64), target='cuda-emulate')) for n in (0, 1, 7)]"
    ),
    "unconsumed_capsules": (
        "d = kiln.to_device(np.ones((2, 3), np.int32), target='cuda-emulate')\n"
        "capsules = [d.__dlpack__(), d.__dlpack__(max_version=(1, 0)), d.__dlpack__(copy=True)]"
    ),
    "view_of_a_view_and_the_array_gone": (
        "d = kiln.to_device(np.arange(6.0).reshape(2, 3), target='cuda-emulate')\n"
        "keep = kiln.from_dlpack(np.from_dlpack(d)[::-1])\n"
        "del d"
    ),
    "imported_numpy_capsule": "from kiln.runtime import dlpack\nheld = dlpack.Imported(np.arange(3).__dlpack__())",
    "cycle_collected_at_exit": (
        "class Node: pass\n"
        "n = Node(); n.self = n; n.view = np.from_dlpack(kiln.to_device(np.zeros(5), target='cuda-emulate'))"
    ),
}


@pytest.mark.parametrize("program", SHUTDOWN_PROGRAMS, ids=list(SHUTDOWN_PROGRAMS))
def test_dlpack_views_alive_at_interpreter_exit_let_it_exit_cleanly(program):
    source = "import sys\nimport numpy as np\nimport kiln\n" + SHUTDOWN_PROGRAMS[program] + "\nprint('done')\n"
    run = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", source], capture_output=True, text=True, timeout=120
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "done\n", "")
