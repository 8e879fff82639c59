"""ONNX recurrent layers: RNN, GRU and LSTM.

kiln's shapes are static, so the sequence length is known when the model is imported and
the time loop is unrolled in Python: the input projection of every step is one matmul
before the loop, and each step is a matmul with the recurrence weights and a few
elementwise ops. The two directions of a bidirectional layer run in the same steps, as one
batch along a leading direction axis (the reverse direction reads its input flipped in
time), so that they cost one set of kernels per step rather than two.

A ``sequence_lens`` shorter than the sequence masks the steps past a batch entry's length:
its state is kept and its output is zero, as the spec says (the reverse direction then
starts at the entry's last step); one known at import time that covers every step costs
nothing.

Gate orders are the spec's: GRU ``[z, r, h]``, LSTM ``[i, o, f, c]`` with peepholes
``[i, o, f]``; the bias input is ``[Wb, Rb]``. Each direction has its own activation
functions ((f) for RNN, (f, g) for GRU, (f, g, h) for LSTM), and ``activation_alpha`` and
``activation_beta`` are consumed in the order of the functions that take them, as
onnxruntime reads them.
"""

from __future__ import annotations

import numpy as np

from kiln.onnx.registry import is_traced, op

_COMMON = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout")

# name (lower case, as runtimes match it) -> (alpha default, beta default, function of x, alpha, beta).
# The defaults are those of the ONNX ops the functions are named after, as the spec says
# (onnxruntime takes 0 for Affine's alpha and ThresholdedRelu's). A default of None means the
# function takes no such value; _REQUIRED that it must be given, because its op (ScaledTanh)
# has no default.
_REQUIRED = object()
_ACTIVATIONS = {
    "relu": (None, None, lambda x, a, b: np.maximum(x, _scalar(x, 0))),
    "tanh": (None, None, lambda x, a, b: np.tanh(x)),
    "sigmoid": (None, None, lambda x, a, b: _sigmoid(x)),
    "affine": (1.0, 0.0, lambda x, a, b: a * x + b),
    "leakyrelu": (0.01, None, lambda x, a, b: np.where(x >= 0, x, a * x)),
    "thresholdedrelu": (1.0, None, lambda x, a, b: np.where(x > a, x, _scalar(x, 0))),
    "scaledtanh": (_REQUIRED, _REQUIRED, lambda x, a, b: a * np.tanh(b * x)),
    "hardsigmoid": (0.2, 0.5, lambda x, a, b: np.clip(a * x + b, _scalar(x, 0), _scalar(x, 1))),
    "elu": (1.0, None, lambda x, a, b: np.where(x >= 0, x, a * np.expm1(x))),
    "softsign": (None, None, lambda x, a, b: x / (_scalar(x, 1) + np.abs(x))),
    "softplus": (None, None, lambda x, a, b: np.logaddexp(_scalar(x, 0), x)),
}


def _scalar(x, value):
    """`value` as a 0-d array of `x`'s dtype, so that it does not promote `x`."""
    return np.asarray(value, x.dtype)


def _sigmoid(x):
    # exp(-x) overflows to inf for very negative x, and 1 / (1 + inf) is the right limit, 0.
    one = _scalar(x, 1)
    return one / (one + np.exp(-x))


class _Layer:
    """What the three ops share: the direction, the activation functions and clip, the
    layout, the validated weights and optional inputs, and the time loop. Arrays inside the
    loop carry a leading direction axis: [num_directions, batch, ...]."""

    def __init__(self, node, x, w, r, gates: int, default_activations: tuple, clipped: tuple):
        self.node = node
        self.dtype = x.dtype
        direction = node.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise node.error(f"direction must be forward, reverse or bidirectional, got {direction!r}")
        self.reversed = [direction == "reverse", True][: 2 if direction == "bidirectional" else 1]
        self.num_directions = len(self.reversed)
        self.layout = node.attr("layout", 0)
        if self.layout not in (0, 1):
            raise node.error(f"layout must be 0 or 1, got {self.layout}")
        if x.ndim != 3:
            raise node.error(f"X must be 3-D, got shape {tuple(x.shape)}")
        # layout 1 is batch-major ([batch, seq, ...]); the loop runs on the time-major form.
        self.x = np.swapaxes(x, 0, 1) if self.layout else x
        self.seq_length, self.batch_size, input_size = self.x.shape
        self.hidden_size = r.shape[-1]
        given = node.attr("hidden_size", None)
        if given is not None and given != self.hidden_size:
            raise node.error(f"hidden_size is {given} but R has shape {tuple(r.shape)}")
        h = self.hidden_size
        self._check_shape("W", w, (self.num_directions, gates * h, input_size))
        self._check_shape("R", r, (self.num_directions, gates * h, h))
        self.w, self.r = w, r
        clip = node.attr("clip", None)
        self.clip = None if clip is None else _scalar(self.x, clip)
        self.activations = self._activations(default_activations, clipped)

    def _check_shape(self, name, value, shape):
        if value is not None and tuple(value.shape) != shape:
            raise self.node.error(f"{name} must have shape {list(shape)}, got {list(value.shape)}")

    def _activations(self, defaults: tuple, clipped: tuple) -> list:
        """The activation functions (f, g, ...) of the op, each a function of an array with a
        leading direction axis; `clipped` says, per function, whether ``clip`` bounds its input."""
        node, per_direction = self.node, len(defaults)
        names = node.attr("activations", None)
        if names is None:
            names = list(defaults) * self.num_directions
        elif len(names) == 2 * per_direction and self.num_directions == 1:
            # RNN's default names two functions, one per direction, whatever the direction:
            # a one-direction layer uses the first, as onnxruntime does.
            names = names[:per_direction]
        if len(names) != per_direction * self.num_directions:
            raise node.error(
                f"activations must name {per_direction} function(s) per direction "
                f"({per_direction * self.num_directions} in all), got {list(names)}"
            )
        alphas = iter(node.attr("activation_alpha", []))
        betas = iter(node.attr("activation_beta", []))
        specs = [self._activation(name, alphas, betas) for name in names]
        # Function k of the op is function k of each direction, applied to the directions together.
        return [self._batched(specs[k::per_direction], clipped[k]) for k in range(per_direction)]

    def _activation(self, name: str, alphas, betas) -> tuple:
        """(name, alpha, beta) of one activation function, its values taken from the attributes."""
        entry = _ACTIVATIONS.get(name.lower())
        if entry is None:
            raise self.node.error(f"activation function {name!r} is not one the spec lists")
        alpha_default, beta_default, _ = entry
        alpha = self._parameter(name, "activation_alpha", alphas, alpha_default)
        beta = self._parameter(name, "activation_beta", betas, beta_default)
        return name.lower(), alpha, beta

    def _parameter(self, name, attribute, values, default):
        """The next value of `attribute` for the activation `name`, or its default; None when
        `name` takes no such value (it then consumes none)."""
        if default is None:
            return None
        value = next(values, default)
        if value is _REQUIRED:
            raise self.node.error(f"activation {name} needs a value in {attribute}; it has no default")
        return float(value)

    def _batched(self, per_direction: list, clipped: bool):
        """One function over [num_directions, ...] from each direction's (name, alpha, beta):
        applied once where the directions agree, else to each direction's slice."""
        clip = self.clip if clipped else None

        def single(spec):
            name, alpha, beta = spec
            function = _ACTIVATIONS[name][2]

            def apply(x):
                a = None if alpha is None else _scalar(x, alpha)
                b = None if beta is None else _scalar(x, beta)
                return function(x, a, b)

            return apply

        functions = [single(spec) for spec in per_direction]

        def apply(x):
            if clip is not None:
                x = np.clip(x, -clip, clip)
            if len(set(per_direction)) == 1:
                return functions[0](x)
            return np.concatenate([f(x[d : d + 1]) for d, f in enumerate(functions)], axis=0)

        return apply

    def optional(self, name, value, shape):
        """The optional input `value` ([num_directions, ...]), or zeros of `shape` when absent."""
        if value is None:
            return np.zeros(shape, self.dtype)
        self._check_shape(name, value, shape)
        return value

    def initial_state(self, name, value):
        """``initial_h``/``initial_c`` ([num_directions, batch, hidden]), zeros when absent."""
        if value is not None and self.layout:
            value = np.swapaxes(value, 0, 1)
        return self.optional(name, value, (self.num_directions, self.batch_size, self.hidden_size))

    def in_loop_order(self, per_time):
        """[seq_length, ...] as [num_directions, seq_length, ...] indexed by the loop's step:
        step k of the reverse direction is time seq_length - 1 - k."""
        return np.stack([np.flip(per_time, 0) if rev else per_time for rev in self.reversed], axis=0)

    def in_time_order(self, per_step):
        """The loop's [seq_length, num_directions, ...] outputs back in time order."""
        if not any(self.reversed):
            return per_step
        if all(self.reversed):
            return np.flip(per_step, 0)
        return np.concatenate([per_step[:, :1], np.flip(per_step[:, 1:], 0)], axis=1)

    def projected(self, bias):
        """X @ W^T + bias for every step of each direction at once, in loop order:
        [num_directions, seq_length, batch, gates * hidden]; `bias` is [num_directions, gates * hidden]."""
        d, t, n = self.num_directions, self.seq_length, self.batch_size
        x = np.reshape(self.in_loop_order(self.x), (d, t * n, -1))  # one [T * batch, input] matrix per direction
        projected = np.matmul(x, np.swapaxes(self.w, 1, 2)) + np.expand_dims(bias, 1)
        return np.reshape(projected, (d, t, n, -1))

    def step_mask(self, sequence_lens):
        """[seq_length, batch, 1] booleans, true where step t is within the batch entry's length;
        None when every step of every entry is (sequence_lens absent, or known and full)."""
        if sequence_lens is None:
            return None
        self._check_shape("sequence_lens", sequence_lens, (self.batch_size,))
        steps = np.arange(self.seq_length).reshape(-1, 1)
        if not is_traced(sequence_lens):
            lens = np.asarray(sequence_lens)
            if np.any((lens < 0) | (lens > self.seq_length)):
                raise self.node.error(f"sequence_lens {lens.tolist()} must lie in [0, {self.seq_length}]")
            if np.all(lens == self.seq_length):
                return None
        return np.expand_dims(steps < np.reshape(sequence_lens, (1, -1)), -1)

    def run(self, cell, state: tuple, projected, sequence_lens):
        """The time loop: `cell(projected step, state) -> state`, each [num_directions, batch, ...],
        the hidden state first. Returns the node's outputs: Y (None when the node does not ask
        for it), then each final state, in the node's layout."""
        mask = self.step_mask(sequence_lens)
        mask_in_loop_order = None if mask is None else self.in_loop_order(mask)
        zero = _scalar(self.x, 0)
        outputs = []
        for k in range(self.seq_length):
            new = cell(projected[:, k], state)
            if mask is not None:
                # Past a batch entry's length its state stays and its output is zero.
                valid = mask_in_loop_order[:, k]
                new = tuple(np.where(valid, n, s) for n, s in zip(new, state))
                outputs.append(np.where(valid, new[0], zero))
            else:
                outputs.append(new[0])
            state = new
        if mask is not None and (is_traced(mask) or not mask[0].all()):
            # A batch entry of length 0 has no last output: its final state is zero, as
            # onnxruntime gives it (time 0 is masked exactly for those entries).
            state = tuple(np.where(mask[0], s, zero) for s in state)
        return (self._y(outputs), *(np.swapaxes(s, 0, 1) if self.layout else s for s in state))

    def _y(self, outputs: list):
        """Y, [seq_length, num_directions, batch, hidden] (layout 1: batch first), from the
        loop's per-step outputs; None when the node leaves its first output out."""
        if not self.node.proto.output or not self.node.proto.output[0]:
            return None
        y = self.in_time_order(np.stack(outputs, axis=0))
        return np.transpose(y, (2, 0, 1, 3)) if self.layout else y

    def recurrence(self, rows=slice(None)):
        """R^T (of `rows` of R) per direction, [num_directions, hidden, n], for state @ R^T."""
        return np.swapaxes(self.r[:, rows], 1, 2)

    def per_direction(self, vector):
        """A [num_directions, n] vector as [num_directions, 1, n], to broadcast over the batch."""
        return np.expand_dims(vector, 1)


@op("RNN", attributes=_COMMON, since=7)
def rnn(node, x, w, r, b=None, sequence_lens=None, initial_h=None):
    """Ht = f(Xt @ Wi^T + Ht-1 @ Ri^T + Wbi + Rbi)."""
    layer = _Layer(node, x, w, r, 1, ("Tanh",), clipped=(True,))
    hidden = layer.hidden_size
    b = layer.optional("B", b, (layer.num_directions, 2 * hidden))
    (f,) = layer.activations
    r_t = layer.recurrence()

    def cell(xw, state):
        return (f(xw + np.matmul(state[0], r_t)),)

    projected = layer.projected(b[:, :hidden] + b[:, hidden:])
    return layer.run(cell, (layer.initial_state("initial_h", initial_h),), projected, sequence_lens)


@op("GRU", attributes=_COMMON + ("linear_before_reset",), since=7)
def gru(node, x, w, r, b=None, sequence_lens=None, initial_h=None):
    """zt = f(Xt @ Wz^T + Ht-1 @ Rz^T + Wbz + Rbz), rt likewise, then
    ht = g(Xt @ Wh^T + (rt * Ht-1) @ Rh^T + Rbh + Wbh), or with linear_before_reset
    ht = g(Xt @ Wh^T + rt * (Ht-1 @ Rh^T + Rbh) + Wbh), and Ht = (1 - zt) * ht + zt * Ht-1."""
    layer = _Layer(node, x, w, r, 3, ("Sigmoid", "Tanh"), clipped=(True, True))
    hidden = layer.hidden_size
    linear_before_reset = node.attr("linear_before_reset", 0)
    b = layer.optional("B", b, (layer.num_directions, 6 * hidden))
    f, g = layer.activations
    one = _scalar(layer.x, 1)
    wb, rb = b[:, : 3 * hidden], b[:, 3 * hidden :]
    rh_bias = layer.per_direction(rb[:, 2 * hidden :])
    if linear_before_reset:
        # Rbh is added to Ht-1 @ Rh^T before the reset gate scales it, so it stays out of the projection.
        bias = wb + np.concatenate([rb[:, : 2 * hidden], np.zeros_like(rb[:, 2 * hidden :])], axis=1)
        r_all = layer.recurrence()
    else:
        bias = wb + rb
        r_zr, r_h = layer.recurrence(slice(0, 2 * hidden)), layer.recurrence(slice(2 * hidden, None))

    def cell(xw, state):
        (h_prev,) = state
        if linear_before_reset:
            recurrent = np.matmul(h_prev, r_all)  # one matmul for all three gates
            z = f(xw[..., :hidden] + recurrent[..., :hidden])
            reset = f(xw[..., hidden : 2 * hidden] + recurrent[..., hidden : 2 * hidden])
            h = g(xw[..., 2 * hidden :] + reset * (recurrent[..., 2 * hidden :] + rh_bias))
        else:
            recurrent = np.matmul(h_prev, r_zr)
            z = f(xw[..., :hidden] + recurrent[..., :hidden])
            reset = f(xw[..., hidden : 2 * hidden] + recurrent[..., hidden:])
            h = g(xw[..., 2 * hidden :] + np.matmul(reset * h_prev, r_h))
        return ((one - z) * h + z * h_prev,)

    return layer.run(cell, (layer.initial_state("initial_h", initial_h),), layer.projected(bias), sequence_lens)


@op("LSTM", attributes=_COMMON + ("input_forget",), since=7)
def lstm(node, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None):
    """it = f(Xt @ Wi^T + Ht-1 @ Ri^T + Pi * Ct-1 + Wbi + Rbi), ft likewise with Pf,
    ct = g(Xt @ Wc^T + Ht-1 @ Rc^T + Wbc + Rbc), Ct = ft * Ct-1 + it * ct,
    ot = f(Xt @ Wo^T + Ht-1 @ Ro^T + Po * Ct + Wbo + Rbo), Ht = ot * h(Ct).
    input_forget=1 couples the forget gate to the input gate: ft = 1 - it."""
    # clip bounds the gates' inputs (peephole terms included) but not the cell state that h
    # reads: it is a cell clip, and onnxruntime applies it so.
    layer = _Layer(node, x, w, r, 4, ("Sigmoid", "Tanh", "Tanh"), clipped=(True, True, False))
    hidden = layer.hidden_size
    input_forget = node.attr("input_forget", 0)
    b = layer.optional("B", b, (layer.num_directions, 8 * hidden))
    f, g, h = layer.activations
    one = _scalar(layer.x, 1)
    peepholes = None
    if p is not None:
        # Without P the peephole terms are left out rather than multiplied by zeros.
        layer.optional("P", p, (layer.num_directions, 3 * hidden))
        peepholes = [layer.per_direction(p[:, k * hidden : (k + 1) * hidden]) for k in range(3)]
    r_t = layer.recurrence()

    def cell(xw, state):
        h_prev, c_prev = state
        gates = xw + np.matmul(h_prev, r_t)
        i, o, forget, c = (gates[..., k * hidden : (k + 1) * hidden] for k in range(4))
        if peepholes is not None:
            p_i, p_o, p_f = peepholes
            i, forget = i + p_i * c_prev, forget + p_f * c_prev
        i = f(i)
        forget = one - i if input_forget else f(forget)
        c_new = forget * c_prev + i * g(c)
        if peepholes is not None:
            o = o + p_o * c_new
        return (f(o) * h(c_new), c_new)

    initial = (layer.initial_state("initial_h", initial_h), layer.initial_state("initial_c", initial_c))
    return layer.run(cell, initial, layer.projected(b[:, : 4 * hidden] + b[:, 4 * hidden :]), sequence_lens)
