"""ONNX recurrent layers: RNN, GRU and LSTM.

kiln's shapes are static, so the sequence length is known when the model is imported and
the time loop is unrolled in Python: the input projection of every step is one matmul
before the loop, and each step is a matmul with the recurrence weights and a few
elementwise ops. A ``sequence_lens`` shorter than the sequence masks the steps past a
batch entry's length (its state is kept and its output is zero, as the spec says); a
``sequence_lens`` known at import time that covers every step costs nothing.

Gate orders are the spec's: GRU ``[z, r, h]``, LSTM ``[i, o, f, c]`` with peepholes
``[i, o, f]``; the bias input is ``[Wb, Rb]``. Each direction has its own activation
functions ((f) for RNN, (f, g) for GRU, (f, g, h) for LSTM), and ``activation_alpha`` and
``activation_beta`` are consumed in the order of the functions that take them.
"""

from __future__ import annotations

import numpy as np

from kiln.onnx.registry import is_traced, op

_COMMON = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout")

# name (lower case, as runtimes match it) -> (alpha default, beta default, function of x, alpha, beta).
# A default of None means the function takes no such value; _REQUIRED that it must be given,
# because the ONNX op the function is named after (ScaledTanh) has no default.
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
    """What the three ops share: the direction, the per-direction activation functions and
    clip, the layout, the validated weights and optional inputs, and the time loop."""

    def __init__(self, node, x, w, r, gates: int, default_activations: tuple, clipped: tuple):
        self.node = node
        self.dtype = x.dtype
        direction = node.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise node.error(f"direction must be forward, reverse or bidirectional, got {direction!r}")
        self.reverse = [direction == "reverse", True][: 2 if direction == "bidirectional" else 1]
        self.num_directions = len(self.reverse)
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
        clip = node.attr("clip", None)
        self.clip = None if clip is None else _scalar(self.x, clip)
        self.activations = self._activations(default_activations, clipped)

    def _check_shape(self, name, value, shape):
        if value is not None and tuple(value.shape) != shape:
            raise self.node.error(f"{name} must have shape {list(shape)}, got {list(value.shape)}")

    def _activations(self, defaults: tuple, clipped: tuple) -> list:
        """One list of activation functions per direction, each a function of one array;
        `clipped` says, per function, whether ``clip`` bounds its input."""
        node, per_direction = self.node, len(defaults)
        names = node.attr("activations", None)
        if names is None:
            names = list(defaults) * self.num_directions
        elif len(names) == per_direction and self.num_directions == 2:
            names = list(names) * 2  # one direction's list serves both, as onnxruntime reads it
        if len(names) != per_direction * self.num_directions:
            raise node.error(
                f"activations must name {per_direction} function(s) per direction "
                f"({per_direction * self.num_directions} in all), got {list(names)}"
            )
        alphas = iter(node.attr("activation_alpha", []))
        betas = iter(node.attr("activation_beta", []))
        functions = [
            self._activation(name, alphas, betas, clipped[k % per_direction]) for k, name in enumerate(names)
        ]
        return [functions[d * per_direction : (d + 1) * per_direction] for d in range(self.num_directions)]

    def _activation(self, name: str, alphas, betas, clipped: bool):
        entry = _ACTIVATIONS.get(name.lower())
        if entry is None:
            raise self.node.error(f"activation function {name!r} is not one the spec lists")
        alpha_default, beta_default, function = entry
        alpha = self._parameter(name, "activation_alpha", alphas, alpha_default)
        beta = self._parameter(name, "activation_beta", betas, beta_default)
        clip = self.clip if clipped else None

        def apply(x):
            if clip is not None:
                x = np.clip(x, -clip, clip)
            return function(x, alpha, beta)

        return apply

    def _parameter(self, name, attribute, values, default):
        """The next value of `attribute` for the activation `name`, or its default; None when
        `name` takes no such value (it then consumes none)."""
        if default is None:
            return None
        value = next(values, default)
        if value is _REQUIRED:
            raise self.node.error(f"activation {name} needs a value in {attribute}; it has no default")
        return _scalar(self.x, value)

    def optional(self, name, value, shape):
        """The optional input `value` ([num_directions, ...]), or zeros of `shape` when absent."""
        if value is None:
            return np.zeros(shape, self.dtype)
        self._check_shape(name, value, shape)
        return value

    def initial_state(self, name, value):
        """``initial_h``/``initial_c`` in the time-major layout, zeros when absent."""
        if value is not None and self.layout:
            value = np.swapaxes(value, 0, 1)
        return self.optional(name, value, (self.num_directions, self.batch_size, self.hidden_size))

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

    def run(self, direction: int, cell, state: tuple, projected, mask):
        """The time loop of one direction: `cell(projected[t], state) -> state`, the hidden
        state first; returns the list of per-step outputs (in time order) and the last state."""
        outputs = [None] * self.seq_length
        steps = range(self.seq_length - 1, -1, -1) if self.reverse[direction] else range(self.seq_length)
        zero = _scalar(self.x, 0)
        for t in steps:
            new = cell(projected[t], state)
            if mask is not None:
                # Past a batch entry's length its state stays and its output is zero.
                new = tuple(np.where(mask[t], n, s) for n, s in zip(new, state))
                outputs[t] = np.where(mask[t], new[0], zero)
            else:
                outputs[t] = new[0]
            state = new
        return outputs, state

    def results(self, outputs: list, states: list):
        """The op's outputs from each direction's per-step outputs and last states: Y (None
        when the node does not ask for it) and one [num_directions, batch, hidden] array per
        state, in the layout the node asks for."""
        wants_y = len(self.node.proto.output) > 0 and self.node.proto.output[0] != ""
        y = None
        if wants_y:
            y = np.stack([np.stack(per_step, axis=0) for per_step in outputs], axis=1)
            if self.layout:
                y = np.transpose(y, (2, 0, 1, 3))
        finals = []
        for k in range(len(states[0])):
            final = np.stack([state[k] for state in states], axis=0)
            finals.append(np.swapaxes(final, 0, 1) if self.layout else final)
        return (y, *finals)


def _projected(layer, w, bias):
    """X @ W^T + bias for every step at once: [seq_length, batch, gates * hidden]."""
    return np.matmul(layer.x, np.swapaxes(w, 0, 1)) + bias


@op("RNN", attributes=_COMMON, since=7)
def rnn(node, x, w, r, b=None, sequence_lens=None, initial_h=None):
    """Ht = f(Xt @ Wi^T + Ht-1 @ Ri^T + Wbi + Rbi)."""
    layer = _Layer(node, x, w, r, 1, ("Tanh",), clipped=(True,))
    hidden = layer.hidden_size
    b = layer.optional("B", b, (layer.num_directions, 2 * hidden))
    h0 = layer.initial_state("initial_h", initial_h)
    mask = layer.step_mask(sequence_lens)
    outputs, states = [], []
    for d in range(layer.num_directions):
        (f,) = layer.activations[d]
        r_t = np.swapaxes(r[d], 0, 1)

        def cell(xw, state, f=f, r_t=r_t):
            return (f(xw + np.matmul(state[0], r_t)),)

        projected = _projected(layer, w[d], b[d, :hidden] + b[d, hidden:])
        per_step, state = layer.run(d, cell, (h0[d],), projected, mask)
        outputs.append(per_step)
        states.append(state)
    return layer.results(outputs, states)


@op("GRU", attributes=_COMMON + ("linear_before_reset",), since=7)
def gru(node, x, w, r, b=None, sequence_lens=None, initial_h=None):
    """zt = f(Xt @ Wz^T + Ht-1 @ Rz^T + Wbz + Rbz), rt likewise, then
    ht = g(Xt @ Wh^T + (rt * Ht-1) @ Rh^T + Rbh + Wbh), or with linear_before_reset
    ht = g(Xt @ Wh^T + rt * (Ht-1 @ Rh^T + Rbh) + Wbh), and Ht = (1 - zt) * ht + zt * Ht-1."""
    layer = _Layer(node, x, w, r, 3, ("Sigmoid", "Tanh"), clipped=(True, True))
    hidden = layer.hidden_size
    linear_before_reset = node.attr("linear_before_reset", 0)
    b = layer.optional("B", b, (layer.num_directions, 6 * hidden))
    h0 = layer.initial_state("initial_h", initial_h)
    mask = layer.step_mask(sequence_lens)
    one = _scalar(layer.x, 1)
    outputs, states = [], []
    for d in range(layer.num_directions):
        f, g = layer.activations[d]
        wb, rb = b[d, : 3 * hidden], b[d, 3 * hidden :]
        if linear_before_reset:
            # Rbh is added to Ht-1 @ Rh^T before the reset gate scales it, so it stays out of the projection.
            bias = wb + np.concatenate([rb[: 2 * hidden], np.zeros_like(rb[2 * hidden :])])
        else:
            bias = wb + rb
        rh_bias = rb[2 * hidden :]
        r_zr = np.swapaxes(r[d, : 2 * hidden], 0, 1)
        r_h = np.swapaxes(r[d, 2 * hidden :], 0, 1)
        r_all = np.swapaxes(r[d], 0, 1)

        def cell(xw, state, f=f, g=g, r_zr=r_zr, r_h=r_h, r_all=r_all, rh_bias=rh_bias):
            (h_prev,) = state
            if linear_before_reset:
                recurrent = np.matmul(h_prev, r_all)  # one matmul for all three gates
                z = f(xw[:, :hidden] + recurrent[:, :hidden])
                reset = f(xw[:, hidden : 2 * hidden] + recurrent[:, hidden : 2 * hidden])
                h = g(xw[:, 2 * hidden :] + reset * (recurrent[:, 2 * hidden :] + rh_bias))
            else:
                recurrent = np.matmul(h_prev, r_zr)
                z = f(xw[:, :hidden] + recurrent[:, :hidden])
                reset = f(xw[:, hidden : 2 * hidden] + recurrent[:, hidden:])
                h = g(xw[:, 2 * hidden :] + np.matmul(reset * h_prev, r_h))
            return ((one - z) * h + z * h_prev,)

        projected = _projected(layer, w[d], bias)
        per_step, state = layer.run(d, cell, (h0[d],), projected, mask)
        outputs.append(per_step)
        states.append(state)
    return layer.results(outputs, states)


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
    if p is not None:
        layer.optional("P", p, (layer.num_directions, 3 * hidden))
    h0 = layer.initial_state("initial_h", initial_h)
    c0 = layer.initial_state("initial_c", initial_c)
    mask = layer.step_mask(sequence_lens)
    one = _scalar(layer.x, 1)
    outputs, states = [], []
    for d in range(layer.num_directions):
        f, g, h = layer.activations[d]
        # Without P the peephole terms are left out rather than multiplied by zeros.
        peepholes = None if p is None else (p[d, :hidden], p[d, hidden : 2 * hidden], p[d, 2 * hidden :])
        r_t = np.swapaxes(r[d], 0, 1)

        def cell(xw, state, f=f, g=g, h=h, r_t=r_t, peepholes=peepholes):
            h_prev, c_prev = state
            gates = xw + np.matmul(h_prev, r_t)
            i, o, forget, c = (gates[:, k * hidden : (k + 1) * hidden] for k in range(4))
            if peepholes is not None:
                p_i, p_o, p_f = peepholes
                i, forget = i + p_i * c_prev, forget + p_f * c_prev
            i = f(i)
            forget = one - i if input_forget else f(forget)
            c_new = forget * c_prev + i * g(c)
            if peepholes is not None:
                o = o + p_o * c_new
            return (f(o) * h(c_new), c_new)

        projected = _projected(layer, w[d], b[d, : 4 * hidden] + b[d, 4 * hidden :])
        per_step, state = layer.run(d, cell, (h0[d], c0[d]), projected, mask)
        outputs.append(per_step)
        states.append(state)
    return layer.results(outputs, states)
