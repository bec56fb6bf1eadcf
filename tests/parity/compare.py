"""Comparisons of the parity kit: relative L2 errors, the router's near-ties (from transformers'
logits), and the expert choices of both sides, which a routing probe reads (hf_side.write_probe:
the same router, experts that write only their own output column)."""
import numpy as np

# Near-tie width by router precision, relative to max(1, |score|): two bf16 ulps where a router
# runs in bf16 (transformers rounds its logits to bf16, we keep the f32 sum of bf16 operands), and
# fp32 summation-order noise where both run in fp32.
NEAR_TIE_RTOL = {"bf16": 2.0 ** -7, "fp32": 1e-5}


def rel_l2(out, ref, rows=None):
    if rows is not None:
        out, ref = out[rows], ref[rows]
    if out.size == 0:
        return 0.0
    num = np.linalg.norm(out.astype(np.float64) - ref.astype(np.float64))
    return float(num / max(np.linalg.norm(ref.astype(np.float64)), 1e-30))


def token_errors(out, ref):
    d = np.linalg.norm(out.astype(np.float64) - ref.astype(np.float64), axis=1)
    return d / np.maximum(np.linalg.norm(ref.astype(np.float64), axis=1), 1e-30)


def _gap(keys, k):
    """Per row: (gap between the k-th and (k+1)-th largest key, their column indices)."""
    order = np.argsort(-keys, axis=1, kind="stable")
    rows = np.arange(keys.shape[0])
    a, b = keys[rows, order[:, k - 1]], keys[rows, order[:, k]]
    return a - b, order[:, k - 1], order[:, k], np.maximum(np.abs(a), 1.0)


def near_ties(logits, problem, selection, rtol, bias=None):
    """Tokens whose router ranks the k-th and (k+1)-th choice within rtol * max(1, |score|).
    `logits`: softmax routers rank the logits themselves; DeepSeek-V3's noaux_tc ranks groups by
    the sum of their two best sigmoid(logit) + bias, then experts of the kept groups by that
    score, so both gaps are checked."""
    k = problem["top_k"]
    logits = logits.astype(np.float64)
    found = []
    if selection == "logits":
        gap, a, b, scale = _gap(logits, k)
        for t in np.nonzero(gap <= rtol * scale)[0]:
            found.append({"token": int(t), "what": "k-th vs (k+1)-th logit",
                          "gap": float(gap[t]), "experts": [int(a[t]), int(b[t])]})
        return found
    keys = 1.0 / (1.0 + np.exp(-logits)) + (0.0 if bias is None else bias.astype(np.float64))
    t_count, e = keys.shape
    groups, keep = problem["num_groups"], problem["topk_group"]
    per = keys.reshape(t_count, groups, e // groups)
    group_scores = np.sort(per, axis=2)[:, :, -2:].sum(axis=2)
    if keep < groups:
        gap, a, b, scale = _gap(group_scores, keep)
        for t in np.nonzero(gap <= rtol * scale)[0]:
            found.append({"token": int(t), "what": "topk_group-th vs next group score",
                          "gap": float(gap[t]), "groups": [int(a[t]), int(b[t])]})
    kept = np.argsort(-group_scores, axis=1, kind="stable")[:, :keep]
    mask = np.zeros((t_count, groups), bool)
    np.put_along_axis(mask, kept, True, axis=1)
    masked = np.where(np.repeat(mask, e // groups, axis=1), keys, -np.inf)
    gap, a, b, scale = _gap(masked, k)
    for t in np.nonzero(gap <= rtol * scale)[0]:
        found.append({"token": int(t), "what": "k-th vs (k+1)-th sigmoid + bias",
                      "gap": float(gap[t]), "experts": [int(a[t]), int(b[t])]})
    return found


def judge(out, expected, ours, theirs, ties, tol):
    """One output against transformers': the error over all tokens and over the tokens both
    routed alike (`ours`, `theirs`: per token, the sorted expert ids), and the tokens routed
    differently, each of which must be a near-tie."""
    err = token_errors(out, expected)
    tie_tokens = {t["token"] for t in ties}
    alike = np.array([a == b for a, b in zip(ours, theirs)])
    differ = [int(t) for t in np.nonzero(~alike)[0]]
    res = {"rel_l2": rel_l2(out, expected), "rel_l2_routed_alike": rel_l2(out, expected, alike),
           "worst_token_error_routed_alike": float(err[alike].max()) if alike.any() else 0.0,
           "routed_differently": [{"token": t, "ours": ours[t], "transformers": theirs[t],
                                   "near_tie": t in tie_tokens, "token_error": float(err[t])}
                                  for t in differ],
           "routing_agreement": f"{int(alike.sum())}/{len(alike)}"}
    res["ok"] = res["rel_l2_routed_alike"] <= tol and all(t in tie_tokens for t in differ)
    return res
