"""ONNX loss functions: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12 on).

Both read, for each sample n and spatial position d1..dk, the class ``target[n, d...]`` of
an (N, C, d1, ..., dk) input; ``ignore_index`` marks targets left out (their loss and
their weight are 0, and the index itself may lie outside [0, C)). The reduction "mean" is
the weighted mean: the sum of the losses over the sum of the weights they got.
"""

from __future__ import annotations

import numpy as np

from kiln.onnx.registry import op, traced_if

_REDUCTIONS = ("none", "sum", "mean")


def _negative_log_likelihood(node, log_prob, target, weight):
    """The loss of `log_prob` (N, C, d...) for classes `target` (N, d...), reduced as the
    node's ``reduction`` says, in `log_prob`'s dtype."""
    reduction = node.attr("reduction", "mean")
    if reduction not in _REDUCTIONS:
        raise node.error(f"reduction must be one of {', '.join(_REDUCTIONS)}, got {reduction!r}")
    if log_prob.ndim < 2:
        raise node.error(f"the input must be (N, C, ...), got shape {list(log_prob.shape)}")
    if target.shape != log_prob.shape[:1] + log_prob.shape[2:]:
        raise node.error(f"target shape {list(target.shape)} does not match input shape {list(log_prob.shape)}")
    dtype = log_prob.dtype
    ignore_index = node.attr("ignore_index", None)
    kept = np.ones(target.shape, dtype=bool) if ignore_index is None else target != ignore_index
    # An ignored target may be any integer: read class 0 in its place, then weigh it by 0.
    safe_target = np.where(kept, target, np.zeros_like(target)).astype(np.int64)
    picked = np.take_along_axis(log_prob, np.expand_dims(safe_target, 1), axis=1)
    loss = -np.squeeze(picked, axis=1)
    weights = np.where(kept, np.ones_like(loss), np.zeros_like(loss))
    if weight is not None:
        weights = weights * np.take(traced_if(weight, safe_target), safe_target)
    loss = loss * weights
    if reduction == "none":
        return loss.astype(dtype)
    total = np.sum(loss, dtype=dtype)
    if reduction == "sum":
        return total.astype(dtype)
    return (total / np.sum(weights, dtype=dtype)).astype(dtype)


@op("NegativeLogLikelihoodLoss", attributes=("ignore_index", "reduction"), since=12)
def negative_log_likelihood_loss(node, input, target, weight=None):
    """The negative log-likelihood of `input`, log-probabilities (N, C, d...), at the
    classes `target` (N, d...), each weighted by ``weight[target]`` when given."""
    return _negative_log_likelihood(node, input, target, weight)


@op("SoftmaxCrossEntropyLoss", attributes=("ignore_index", "reduction"), since=12)
def softmax_cross_entropy_loss(node, scores, labels, weights=None):
    """The cross entropy of softmax(`scores`) over the class axis 1 and `labels`: the
    negative log-likelihood of the log-softmax, which is also the optional second output."""
    shifted = scores - np.max(scores, axis=1, keepdims=True)
    log_prob = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True, dtype=scores.dtype))
    log_prob = log_prob.astype(scores.dtype)
    loss = _negative_log_likelihood(node, log_prob, labels, weights)
    return (loss, log_prob) if len(node.proto.output) > 1 else loss
