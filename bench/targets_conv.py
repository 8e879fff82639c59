"""Convolutional workloads: kiln against ONNX Runtime and PyTorch, as time ratios in one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/run.py --only conv,conv_layers,pool,conv_backward
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/run.py --only resnet50,squeezenet
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/run.py --only shufflenet,inception_v1,densenet121

Each table shows milliseconds, GFLOP/s (for convolutions) and each implementation's speed
relative to ONNX Runtime and PyTorch (above 1: kiln is faster). Convolutions and pools go
through kiln.onnx.load of a one-node model, as imported models run them; ONNX Runtime runs
the same model. Whole models are the onnx package's light ResNet-50, SqueezeNet, ShuffleNet,
Inception v1 and DenseNet-121 with random weights, batch 1 and 8.
"""

from __future__ import annotations

import os
import sys

from harness import ROOT, interleaved

# ResNet-50's convolution shapes (N, C, H, F, kernel, stride, padding), then MobileNet's and
# ShuffleNet's grouped ones (the last field: groups).
RESNET_LAYERS = [
    ("stem 7x7/2 3->64 @224", 3, 224, 64, 7, 2, 3, 1),
    ("1x1 256->64 @56", 256, 56, 64, 1, 1, 0, 1),
    ("3x3 64->64 @56", 64, 56, 64, 3, 1, 1, 1),
    ("3x3/2 128->128 @56", 128, 56, 128, 3, 2, 1, 1),
    ("1x1/2 256->512 @56", 256, 56, 512, 1, 2, 0, 1),
    ("1x1 1024->256 @14", 1024, 14, 256, 1, 1, 0, 1),
    ("3x3 512->512 @7", 512, 7, 512, 3, 1, 1, 1),
]
GROUPED_LAYERS = [
    ("depthwise 3x3 32 @112", 32, 112, 32, 3, 1, 1, 32),
    ("depthwise 3x3/2 144 @56", 144, 56, 144, 3, 2, 1, 144),
    ("grouped 1x1 g3 240->240 @28", 240, 28, 240, 1, 1, 0, 3),
]


def _print_table(title, times, flops=None):
    print(f"\n{title}")
    for name, seconds in times.items():
        rate = f"{flops / seconds / 1e9:>8.1f} GFLOP/s" if flops else ""
        ratios = "".join(f"  {times[p] / seconds:>6.2f}x {p}" for p in ("onnxruntime", "torch") if p in times)
        print(f"  {name:<14}{seconds * 1e3:>10.3f} ms {rate}{ratios}")


def _ort_session(found, model):
    ort = found["onnxruntime"]
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(os.environ["KILN_NUM_THREADS"])
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _conv_model(x_shape, w, stride, padding, groups):
    from onnx import helper, numpy_helper

    node = helper.make_node(
        "Conv",
        ["x", "w"],
        ["y"],
        strides=[stride] * 2,
        pads=[padding] * 4,
        group=groups,
        kernel_shape=list(w.shape[2:]),
    )
    graph = helper.make_graph(
        [node],
        "conv",
        [helper.make_tensor_value_info("x", 1, x_shape)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(w, "w")],
    )
    return _inferred(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def _inferred(model):
    import onnx

    return onnx.shape_inference.infer_shapes(model)


def _bench_conv_layer(np, kiln, found, title, batch, c, h, f, k, stride, padding, groups, rounds=5):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, c, h, h), dtype=np.float32)
    w = rng.standard_normal((f, c // groups, k, k), dtype=np.float32)
    model = _conv_model(x.shape, w, stride, padding, groups)
    compiled = kiln.onnx.load(model)
    impl = {"kiln": lambda: compiled(x)}
    want = None
    if "onnxruntime" in found:
        session = _ort_session(found, model)
        impl["onnxruntime"] = lambda: session.run(None, {"x": x})
        want = session.run(None, {"x": x})[0]
    if "torch" in found:
        torch = found["torch"]
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        impl["torch"] = lambda: torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding, groups=groups)
        want = impl["torch"]().numpy()
    if want is not None:
        np.testing.assert_allclose(compiled(x)[0], want, rtol=1e-3, atol=1e-3 * np.sqrt(c // groups * k * k))
    out = (h + 2 * padding - k) // stride + 1
    flops = 2 * batch * f * out * out * (c // groups) * k * k
    _print_table(f"conv2d {title}, batch {batch}", interleaved(impl, rounds=rounds), flops)


def bench_conv(np, kiln, found, quick):
    """The issue's reference shape: 8x64x56x56, 64 3x3 filters, padding 1."""
    _bench_conv_layer(np, kiln, found, "3x3 64->64 @56 (pad 1)", 1 if quick else 8, 64, 56, 64, 3, 1, 1, 1)


def bench_conv_layers(np, kiln, found, quick):
    for batch in (1,) if quick else (1, 8):
        for layer in RESNET_LAYERS + GROUPED_LAYERS:
            _bench_conv_layer(np, kiln, found, layer[0], batch, *layer[1:], rounds=3)


def bench_pool(np, kiln, found, quick):
    """ResNet's max pool (3x3, stride 2, padding 1) after the stem."""
    from onnx import helper

    batch = 1 if quick else 8
    x = np.random.default_rng(0).standard_normal((batch, 64, 112, 112), dtype=np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node], "pool", [helper.make_tensor_value_info("x", 1, x.shape)], [helper.make_empty_tensor_value_info("y")]
    )
    model = _inferred(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    compiled = kiln.onnx.load(model)
    impl = {"kiln": lambda: compiled(x)}
    if "onnxruntime" in found:
        session = _ort_session(found, model)
        impl["onnxruntime"] = lambda: session.run(None, {"x": x})
        np.testing.assert_array_equal(compiled(x)[0], session.run(None, {"x": x})[0])
    if "torch" in found:
        torch = found["torch"]
        tx = torch.from_numpy(x)
        impl["torch"] = lambda: torch.nn.functional.max_pool2d(tx, 3, 2, 1)
    _print_table(f"max pool 3x3/2 pad 1, {batch}x64x112x112", interleaved(impl))


def bench_conv_backward(np, kiln, found, quick):
    """A CNN training step's convolution: loss = sum(relu(conv(x, w))^2), gradients of x and w."""
    batch = 1 if quick else 8
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 64, 56, 56), dtype=np.float32)
    w = rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * 0.05

    def loss(x, w):
        return np.sum(np.maximum(kiln.conv2d(x, w, padding=1), 0) ** 2)

    step = kiln.compile(kiln.value_and_grad(loss, argnums=(0, 1)))
    impl = {"kiln": lambda: step(x, w)}
    if "torch" in found:
        torch = found["torch"]
        tx, tw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()

        def torch_step():
            tx.grad = tw.grad = None
            value = (torch.relu(torch.nn.functional.conv2d(tx, tw, padding=1)) ** 2).sum()
            value.backward()
            return value, tx.grad, tw.grad

        impl["torch"] = torch_step
        _, (gx, gw) = step(x, w)
        _, tgx, tgw = torch_step()
        np.testing.assert_allclose(gw, tgw.numpy(), rtol=2e-3, atol=2e-3 * float(np.abs(gw).max()))
        np.testing.assert_allclose(gx, tgx.numpy(), rtol=2e-3, atol=2e-3 * float(np.abs(gx).max()))
    flops = 3 * 2 * batch * 64 * 56 * 56 * 64 * 9  # forward, input gradient, weight gradient
    _print_table(f"conv2d forward + backward, {batch}x64x56x56, 64 3x3 filters", interleaved(impl, rounds=3), flops)


def _light_model(name, batch):
    """The onnx package's light `name` model with random weights and a batch of `batch` images."""
    import onnx
    from onnx import numpy_helper

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    if name == "resnet50":
        import onnx_resnet

        model = onnx_resnet.resnet50(0)
    else:
        import test_onnx_zoo

        model = onnx.load(os.path.join(test_onnx_zoo.LIGHT, f"light_{name}.onnx"))
        filled = test_onnx_zoo._weights_as_initializers(model)
        for t in model.graph.initializer:
            if t.name in filled:
                t.CopyFrom(
                    numpy_helper.from_array(test_onnx_zoo._random_weights({t.name: filled[t.name]}, 0)[t.name], t.name)
                )
    initialized = {t.name for t in model.graph.initializer}
    image = next(v for v in model.graph.input if v.name not in initialized)
    image.type.tensor_type.shape.dim[0].dim_value = batch
    for output in model.graph.output:
        output.type.tensor_type.shape.dim[0].dim_param = "N"
    # A Reshape to a constant shape that starts with the batch of 1 (a flatten to (1, features),
    # ShuffleNet's channel shuffle) keeps the input's batch instead: 0 copies that dimension.
    shapes = {node.input[1] for node in model.graph.node if node.op_type == "Reshape"}
    for t in model.graph.initializer:
        if t.name in shapes and t.data_type == onnx.TensorProto.INT64 and list(numpy_helper.to_array(t)[:1]) == [1]:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * ([0] + [1] * (t.dims[0] - 1)), t.name))
    del model.graph.value_info[:]  # shapes declared for a batch of 1: let both runtimes infer them
    shape = [d.dim_value for d in image.type.tensor_type.shape.dim]
    return model, image.name, shape


def _bench_model(np, kiln, found, name, quick):
    for batch in (1,) if quick else (1, 8):
        model, input_name, shape = _light_model(name, batch)
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        compiled = kiln.onnx.load(model)
        impl = {"kiln": lambda: compiled(x)}
        if "onnxruntime" in found:
            session = _ort_session(found, model)
            impl["onnxruntime"] = lambda: session.run(None, {input_name: x})
            got, want = compiled(x)[0], session.run(None, {input_name: x})[0]
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
        _print_table(f"{name} from ONNX, batch {batch}", interleaved(impl, rounds=3))


def bench_resnet50(np, kiln, found, quick):
    _bench_model(np, kiln, found, "resnet50", quick)


def bench_squeezenet(np, kiln, found, quick):
    _bench_model(np, kiln, found, "squeezenet", quick)


def bench_shufflenet(np, kiln, found, quick):
    _bench_model(np, kiln, found, "shufflenet", quick)


def bench_inception_v1(np, kiln, found, quick):
    _bench_model(np, kiln, found, "inception_v1", quick)


def bench_densenet121(np, kiln, found, quick):
    _bench_model(np, kiln, found, "densenet121", quick)


WORKLOADS = {
    "conv": bench_conv,
    "conv_layers": bench_conv_layers,
    "pool": bench_pool,
    "conv_backward": bench_conv_backward,
    "resnet50": bench_resnet50,
    "squeezenet": bench_squeezenet,
    "shufflenet": bench_shufflenet,
    "inception_v1": bench_inception_v1,
    "densenet121": bench_densenet121,
}
