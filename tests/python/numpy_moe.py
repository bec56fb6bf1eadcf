"""The MoE layer in NumPy, written from docs/design.md §4 and §5.2 alone (not from the reference's
code), for bf16 weights, silu_mul and softmax_topk: the independent check of what the package
returns."""

import ml_dtypes
import numpy as np


def softmax_topk(logits, top_k, renormalize):
    """§4: softmax in double, top-k best first with ties to the lowest index, weights to f32."""
    z = logits.astype(np.float64)
    s = np.exp(z - z.max(axis=1, keepdims=True))
    s /= s.sum(axis=1, keepdims=True)
    ids = np.argsort(-s, axis=1, kind="stable")[:, :top_k]
    w = np.take_along_axis(s, ids, axis=1)
    if renormalize:
        w /= w.sum(axis=1, keepdims=True)
    return ids.astype(np.int32), w.astype(np.float32)


def layer(hidden, w13, w2, ids, weights):
    """§5.2 for bf16: GEMMs in double; input_format bf16 quantises nothing, so the intermediate
    stays in double; combined in double and rounded to bf16 once. hidden [T, H], w13 [E, 2I, H],
    w2 [E, H, I] (bf16); -> [T, H] bf16."""
    x = hidden.astype(np.float64)
    inter = w2.shape[2]
    out = np.zeros(x.shape, np.float64)
    for t in range(x.shape[0]):
        for e, w in zip(ids[t], weights[t]):
            if e < 0:
                continue
            gate_up = w13[e].astype(np.float64) @ x[t]
            g, u = gate_up[:inter], gate_up[inter:]
            a = (g / (1.0 + np.exp(-g))) * u
            out[t] += float(w) * (w2[e].astype(np.float64) @ a)
    return out.astype(np.float32).astype(ml_dtypes.bfloat16)


def rel_l2(got, want):
    got, want = got.astype(np.float64), want.astype(np.float64)
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
