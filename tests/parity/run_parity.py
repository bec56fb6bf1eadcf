#!/usr/bin/env python3
"""Parity with Hugging Face transformers (issue 14 item 6): for each MoE architecture, build a tiny
random model, save_pretrained it in fp32 and bf16, run its MoE block with transformers, run the
same checkpoint with `moe run --inputs --output` on our backends, and compare.

    python3 tests/parity/run_parity.py --moe build/bin/moe --out DIR \
        [--backends reference,trtllm_style] [--arch mixtral,deepseek_v3] [--dtypes fp32,bf16]

Needs torch, transformers, safetensors and numpy (not part of CI; tests/parity/README.md). Per
architecture and dtype, every backend runs twice: with our router (logits from the checkpoint's
router weight, `checkpoint: router_dtype` following the router's stored dtype) and with
transformers' router logits given as `router_logits`, which isolates routing from expert compute;
each also on a routing probe of the checkpoint, which shows the experts every token reached. A
case passes when both outputs are within --tol (relative L2, 1e-2) of transformers' over the
tokens both route alike, and every token routed differently is a near-tie. Writes
DIR/<date>_transformers_parity.json and .md; exits 1 when a case fails or errors.
"""
import argparse
import datetime
import os
import shutil
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_side  # noqa: E402
from architectures import ARCHITECTURES, DEFAULT  # noqa: E402

try:
    import compare
    import hf_side
    import report
except ImportError as e:
    sys.exit(f"run_parity.py needs torch, transformers, safetensors and numpy ({e}); "
             "see tests/parity/README.md")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moe", required=True, help="the moe tool, e.g. build/bin/moe")
    ap.add_argument("--out", required=True,
                    help="directory for <date>_transformers_parity.json and .md")
    ap.add_argument("--backends", default="all",
                    help="comma-separated plugin names, or 'all': every plugin found that "
                         "supports the problem (the others are listed as skipped)")
    ap.add_argument("--arch", default=None,
                    help=f"comma-separated, of: {', '.join(ARCHITECTURES)} (default: all)")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-2, help="relative L2 bound")
    ap.add_argument("--near-tie", type=float, default=None,
                    help="near-tie width relative to max(1, |score|) (default: 2^-7 where either "
                         "router runs in bf16, else 1e-5)")
    ap.add_argument("--router-dtype", choices=("auto", "bf16", "fp32"), default="auto",
                    help="checkpoint: router_dtype of our configs; auto: fp32 where the saved "
                         "router weight is F32 (transformers then routes in fp32), else bf16")
    ap.add_argument("--work", default=None, help="keep checkpoints and configs here")
    a = ap.parse_args()
    a.explicit = a.arch is not None  # an architecture asked for by name must be available
    a.arch = [x for x in (a.arch or ",".join(DEFAULT)).split(",") if x]
    a.dtypes = [x for x in a.dtypes.split(",") if x]
    unknown = [x for x in a.arch if x not in ARCHITECTURES]
    if unknown:
        ap.error(f"unknown --arch {', '.join(unknown)} (known: {', '.join(ARCHITECTURES)})")
    if any(d not in hf_side.DTYPES for d in a.dtypes):
        ap.error(f"--dtypes takes {', '.join(hf_side.DTYPES)}")
    return a


def _block_prefix(tensors, arch):
    """The saved MoE block's prefix (with {layer}), or None when no block attribute matches."""
    for attr in arch.block_attrs:
        if any(k.startswith(f"model.layers.{arch.layer}.{attr}.experts") for k in tensors):
            return f"model.layers.{{layer}}.{attr}"
    return None


def _block_tensors(tensors, prefix):
    """The block's tensors as saved, relative to prefix (of per-expert ones, expert 0 only)."""
    keep = {}
    for k, (dt, shape) in sorted(tensors.items()):
        if not k.startswith(prefix + "."):
            continue
        rel = k[len(prefix) + 1:]
        parts = rel.split(".")
        if parts[0] == "experts" and len(parts) > 2 and parts[1].isdigit() and parts[1] != "0":
            continue
        keep[rel] = f"{dt} {shape}"
    return keep


def _router_precision(tensors, prefix, dtype):
    """The precision transformers' router runs in: its weight's stored dtype (a bf16 model may keep
    its router in fp32, as DeepSeek-V3 does), fp32 for an fp32 model."""
    for name in ("gate.weight", "router.weight"):
        if f"{prefix}.{name}" in tensors:
            return "fp32" if tensors[f"{prefix}.{name}"][0] == "F32" else "bf16"
    return dtype


def run_backend(args, arch, case, work, backend, hf):
    """Runs `backend` with our router and with transformers' logits, each on the checkpoint and
    on its routing probe, and judges both against transformers."""
    cfg = os.path.join(work, f"{backend}.yaml")
    moe_side.write_config(cfg, backend, case["problem"], case["checkpoint"], args.tokens)
    res = {}
    for mode, inputs in (("own_router", "inputs.safetensors"),
                         ("hf_logits", "inputs_hf_logits.safetensors")):
        runs = {}
        for what, ckpt in (("output", None), ("probe", case["probe_path"])):
            out = os.path.join(work, f"{backend}_{mode}_{what}.safetensors")
            r = moe_side.run(args.moe, cfg, os.path.join(work, inputs), out, ckpt)
            if "error" in r:
                refused = arch.refusal is not None and arch.refusal in r["error"]
                return {"status": "refused" if refused else "error", "message": r["error"]}
            runs[what] = (r, report.read_output(out))
        r, out = runs["output"]
        ours = hf_side.probe_ids(runs["probe"][1], case["problem"]["experts"])
        res[mode] = compare.judge(out, hf["output"], ours, hf["ids"], case["near_ties"], args.tol)
        res[mode]["rel_err_vs_reference"] = r["rel_err_vs_reference"]
        res["weights"], res["inputs_" + mode] = r["weights"], r["inputs"]
    res["status"] = "pass" if res["own_router"]["ok"] and res["hf_logits"]["ok"] else "fail"
    return res


def _transformers_side(arch, case, path, dtype, hidden, work):
    """transformers' output and logits, and its expert choice read through the routing probe
    (checked against the top-k its router returns, where it returns one)."""
    experts = case["problem"]["experts"]
    hf = hf_side.run_block(arch, path, dtype, hidden, experts)
    case["probe_path"] = os.path.join(work, "probe")
    hf_side.write_probe(arch, path, dtype, case["probe_path"], experts)
    hf_side.check_probe_router(path, case["probe_path"],
                               case["checkpoint"]["prefix"].format(layer=arch.layer))
    hf["ids"] = hf_side.probe_ids(hf_side.run_block(arch, case["probe_path"], dtype, hidden,
                                                    experts)["output"], experts)
    if "topk_ids" in hf:
        exposed = [sorted(int(e) for e in row) for row in hf["topk_ids"]]
        if exposed != hf["ids"]:
            raise RuntimeError(f"{arch.name}: the routing probe disagrees with the router's own "
                               "top-k: the probe does not work for this module")
    case["hf"] = {"module": hf["module"], "router_module": hf["router_module"],
                  "logits_source": hf["logits_source"],
                  "experts_implementation": hf["experts_implementation"],
                  "probe_matches_router_topk": "topk_ids" in hf or "not exposed"}
    return hf


def run_case(args, arch, dtype, path, hidden, work):
    """One architecture in one dtype: the saved checkpoint against transformers, every backend."""
    config = hf_side.make_config(arch)
    tensors = hf_side.saved_tensors(path)
    case = {"arch": arch.name, "dtype": dtype, "hf_classes": [arch.config_class, arch.model_class],
            "problem": {**arch.problem(config), "format": "bf16"}}
    prefix = _block_prefix(tensors, arch)
    if prefix is None:
        layer = f"model.layers.{arch.layer}."
        case.update(status="error", message="save_pretrained wrote no MoE block under "
                    f"{layer}{{{','.join(arch.block_attrs)}}}.experts*",
                    saved={k: f"{v[0]} {v[1]}" for k, v in tensors.items() if k.startswith(layer)})
        return case
    concrete = prefix.format(layer=arch.layer)
    hf_router = _router_precision(tensors, concrete, dtype)
    ours = hf_router if args.router_dtype == "auto" else args.router_dtype
    case["checkpoint"] = {"path": path, "convention": arch.convention, "prefix": prefix,
                          "layer": arch.layer, "router_dtype": ours}
    case["hf_router_precision"] = hf_router
    case["saved_block_tensors"] = _block_tensors(tensors, concrete)
    hf = _transformers_side(arch, case, path, dtype, hidden, work)
    hf_side.write_hidden(os.path.join(work, "inputs.safetensors"), hidden, dtype)
    hf_side.write_hidden(os.path.join(work, "inputs_hf_logits.safetensors"), hidden, dtype,
                         hf["logits"])
    extra = {k: hf[k] for k in ("logits", "topk_ids") if k in hf}
    hf_side.write_safetensors(os.path.join(work, "expected.safetensors"),
                              {"output": hf["output"], **extra})
    rtol = args.near_tie if args.near_tie is not None else max(
        compare.NEAR_TIE_RTOL[hf_router], compare.NEAR_TIE_RTOL[ours])
    case["near_tie_rtol"] = rtol
    case["near_ties"] = compare.near_ties(hf["logits"], case["problem"], arch.selection, rtol,
                                          hf["bias"])
    select_cfg = os.path.join(work, "select.yaml")
    moe_side.write_config(select_cfg, "reference", case["problem"], case["checkpoint"],
                          args.tokens)
    answers = moe_side.select(args.moe, select_cfg)
    names = sorted(answers, key=lambda n: (n != "reference", n)) if args.backends == "all" \
        else args.backends.split(",")
    case["backends"] = {}
    for b in names:
        if b not in answers:
            case["backends"][b] = {"status": "error", "message": f"no plugin named {b} was found"}
        elif not answers[b][0]:
            case["backends"][b] = {"status": "skip", "message": answers[b][1]}
        else:
            case["backends"][b] = run_backend(args, arch, case, work, b, hf)
    return case


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = args.work or tempfile.mkdtemp(prefix="moe-parity-")
    doc = {"date": datetime.date.today().isoformat(), "command": " ".join(sys.argv),
           "versions": {**hf_side.versions(), "moe": moe_side.version(args.moe)},
           "device": report.device(), "tokens": args.tokens, "seed": args.seed, "tol": args.tol,
           "cases": []}
    for name in args.arch:
        arch = ARCHITECTURES[name]
        print(f"== {name}", flush=True)
        arch_work = os.path.join(work, name)
        seed = zlib.crc32(f"{name}:{args.seed}".encode())  # independent draws per architecture
        try:
            paths = hf_side.build_and_save(arch, seed, arch_work)
        except hf_side.Unavailable as e:
            print(f"   unavailable: {e}", file=sys.stderr)
            doc["cases"].append({"arch": name, "status": "unavailable", "message": str(e),
                                 "explicit": args.explicit})
            continue
        except Exception as e:  # noqa: BLE001  (e.g. a config this transformers rejects)
            print(f"   error: {type(e).__name__}: {e}", file=sys.stderr)
            doc["cases"].append({"arch": name, "status": "error",
                                 "message": f"building the model: {type(e).__name__}: {e}"})
            continue
        config = hf_side.make_config(arch)
        hidden = hf_side.hidden_states(args.tokens, config.hidden_size, seed)
        for dtype in args.dtypes:
            case_work = os.path.join(arch_work, f"run_{dtype}")
            os.makedirs(case_work, exist_ok=True)
            try:
                case = run_case(args, arch, dtype, paths[dtype], hidden, case_work)
            except hf_side.Unavailable as e:
                case = {"arch": name, "dtype": dtype, "status": "unavailable", "message": str(e),
                        "explicit": args.explicit}
            except Exception as e:  # noqa: BLE001  (one case's failure is reported, not fatal)
                case = {"arch": name, "dtype": dtype, "status": "error",
                        "message": f"{type(e).__name__}: {e}"}
            doc["cases"].append(case)
            print(report.case_line(case), flush=True)
    report.write(args.out, doc)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    failed = report.failures(doc)
    print(f"wrote {' and '.join(report.paths(args.out, doc))}; "
          f"{'all cases pass' if not failed else 'failing: ' + ', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
