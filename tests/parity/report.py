"""What the parity kit writes: <date>_transformers_parity.json (everything) and .md (the table,
the backends not run, the near-ties), and the one-line progress per case."""
import json
import os
import platform

import numpy as np


def read_output(path):
    """`moe run --output`'s output [T, H] (bf16) as f32."""
    from safetensors.torch import load_file
    return load_file(path)["output"].float().numpy()


def device():
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001  (no usable CUDA: this is a host run)
        pass
    return f"host ({platform.machine()}, no GPU)"


def _status(case):
    if "status" in case:
        return case["status"]
    states = {b["status"] for b in case["backends"].values()}
    return "fail" if states & {"fail", "error"} else "pass"


def failures(doc):
    out = []
    for c in doc["cases"]:
        s = _status(c)
        if s in ("fail", "error") or (s == "unavailable" and c.get("explicit")):
            out.append(f"{c['arch']}/{c.get('dtype', '-')}")
    return out


def case_line(case):
    head = f"   {case['arch']} {case['dtype']}:"
    if "backends" not in case:
        return f"{head} {case['status']}: {case['message']}"
    parts = []
    for name, b in case["backends"].items():
        if b["status"] == "skip":
            parts.append(f"{name} skip")
        elif b["status"] in ("error", "refused"):
            parts.append(f"{name} {b['status']} ({b['message']})")
        else:
            o, g = b["own_router"], b["hf_logits"]
            parts.append(f"{name} {b['status']} rel_l2 {o['rel_l2']:.2e} (routed alike "
                         f"{o['rel_l2_routed_alike']:.2e}; with hf logits "
                         f"{g['rel_l2_routed_alike']:.2e}) routing {o['routing_agreement']} "
                         f"(hf logits {g['routing_agreement']})")
    return f"{head} near-ties {len(case['near_ties'])}; " + "; ".join(parts)


def _fmt(x):
    return f"{x:.2e}"


def _table(doc):
    rows = ["| arch | dtype | router | backend | rel L2 | rel L2, tokens routed alike "
            "(our router / HF logits) | same experts (our router / HF logits) | near-ties | "
            "status |", "|" + "---|" * 9]
    for c in doc["cases"]:
        if "backends" not in c:
            rows.append(f"| {c['arch']} | {c.get('dtype', '-')} | | | | | | | "
                        f"{c['status']}: {c['message']} |")
            continue
        router = c["checkpoint"]["router_dtype"]
        for name, b in c["backends"].items():
            if b["status"] == "skip":
                continue
            if "own_router" not in b:
                rows.append(f"| {c['arch']} | {c['dtype']} | {router} | {name} | | | | "
                            f"{len(c['near_ties'])} | {b['status']}: {b['message']} |")
                continue
            o, g = b["own_router"], b["hf_logits"]
            rows.append(f"| {c['arch']} | {c['dtype']} | {router} | {name} | {_fmt(o['rel_l2'])} "
                        f"| {_fmt(o['rel_l2_routed_alike'])} / "
                        f"{_fmt(g['rel_l2_routed_alike'])} | {o['routing_agreement']} / "
                        f"{g['routing_agreement']} | "
                        f"{len(c['near_ties'])} | {b['status']} |")
    return rows


def _skips(doc):
    seen = {}
    for c in doc["cases"]:
        for name, b in c.get("backends", {}).items():
            if b["status"] == "skip":
                seen.setdefault((name, b["message"]), []).append(f"{c['arch']} {c['dtype']}")
    return [f"- {n}: {m} ({len(cases)} case{'s' if len(cases) > 1 else ''})"
            for (n, m), cases in seen.items()] or ["- none"]


def _ties(doc):
    out = []
    for c in doc["cases"]:
        runs = {n: b for n, b in c.get("backends", {}).items() if "own_router" in b}
        for t in c.get("near_ties", []):
            moved = []
            for n, b in runs.items():
                d = [r for r in b["own_router"]["routed_differently"] if r["token"] == t["token"]]
                moved.append(f"{n}: " + (f"experts {d[0]['ours']} vs {d[0]['transformers']}, "
                                         f"token error {d[0]['token_error']:.2e}" if d else "same"))
            who = f"experts {t['experts']}" if "experts" in t else f"groups {t['groups']}"
            out.append(f"- {c['arch']} {c['dtype']}, token {t['token']}: {t['what']} "
                       f"{t['gap']:.2e} apart ({who}); {'; '.join(moved) or 'not run'}")
    return out or ["- none"]


def paths(out_dir, doc):
    base = os.path.join(out_dir, f"{doc['date']}_transformers_parity")
    return base + ".json", base + ".md"


def write(out_dir, doc):
    json_path, md_path = paths(out_dir, doc)
    with open(json_path, "w") as f:
        json.dump(doc, f, indent=1, default=lambda o: o.tolist() if isinstance(o, np.ndarray)
                  else str(o))
    v = doc["versions"]
    lines = [f"# Parity with transformers ({doc['date']})", "",
             f"`{doc['command']}`", "",
             f"transformers {v['transformers']}, torch {v['torch']}, {v['moe']}; device: "
             f"{doc['device']}; {doc['tokens']} tokens, seed {doc['seed']}; bound: relative L2 "
             f"<= {doc['tol']:g} over the tokens both sides route to the same experts, for our "
             "router (logits from the checkpoint's router weight) and with transformers' router "
             "logits given; every token routed differently must be a near-tie. Expert choices "
             "are read through a routing probe (tests/parity/README.md).", ""]
    lines += _table(doc) + ["", "Backends not run (moe select's answer):", ""] + _skips(doc)
    lines += ["", "Near-ties (transformers' k-th and (k+1)-th choice within the "
                            "case's near_tie_rtol x max(1, |score|)), and what our router did "
                            "there:", ""]
    lines += _ties(doc)
    with open(md_path, "w") as f:
        f.write("\n".join(lines) + "\n")
