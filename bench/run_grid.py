#!/usr/bin/env python3
"""Runs the docs/design.md §8 grid on a GPU: `moe bench` for our backend, then the peers in --peers
(torch_moe.py, triton_moe.py: torch._grouped_mm, the tuned Triton MoE, per-expert cuBLAS) in the same
run, on the same routing (moe bench dumps it). Writes JSON Lines records with the peers filled in,
a markdown table and a plot (time vs tokens per shape: us, peers, floor).

    python3 bench/run_grid.py --moe build/bin/moe --peers .peers --out $OUT \
        --shapes qwen3_30b_a3b,mixtral_8x7b --tokens 1,8,64,512,4096,16384
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grid_report  # noqa: E402


def bench_ms(fn, graph, iters=50, warmup=10):
    """Median ms of fn() with CUDA events; graph=True replays a CUDA graph when fn can be captured
    (the torch peers copy host tensors and cannot: then they are timed eagerly, and say so)."""
    if graph:
        try:
            return _bench(fn, True, iters, warmup), True
        except Exception:
            torch.cuda.synchronize()
    return _bench(fn, False, iters, warmup), False


def _bench(fn, graph, iters, warmup):
    if graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        run = g.replay
    else:
        run = fn
    for _ in range(warmup):
        run()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        run()
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return times[len(times) // 2]


def peers_for(rec, routing_file, peers_dir):
    sys.path.insert(0, peers_dir)
    import torch_moe
    import triton_moe
    E, H, I = rec["experts"], rec["hidden"], rec["intermediate"]
    T = rec["tokens"]
    r = load_file(routing_file)
    ids, w = r["topk_ids"].cuda(), r["topk_weights"].cuda()
    k = rec["top_k"]
    ids, w = ids[:, :k].contiguous(), w[:, :k].contiguous()  # routed columns (no sinks)
    torch.manual_seed(0)
    x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
    w13 = (torch.randn(E, 2 * I, H, device="cuda", dtype=torch.bfloat16) * H ** -0.5)
    w2 = (torch.randn(E, H, I, device="cuda", dtype=torch.bfloat16) * I ** -0.5)
    graph = rec["graph"]
    out, graphed, eager = {}, {}, {}
    fns = {"torch_grouped_mm": lambda: torch_moe.grouped_mm_moe(x, w13, w2, w, ids)}
    tri = triton_moe.TritonMoE(w13, w2)
    fns["triton"] = lambda: tri(x, w, ids)
    for name, fn in fns.items():
        out[name], graphed[name] = bench_ms(fn, graph)
        # Like with like: where a graph was replayed, every side is also timed eagerly.
        if graph:
            eager[name] = bench_ms(fn, False)[0] if graphed[name] else out[name]
    if T <= 4096:  # per-expert matmuls in a Python loop: slow and host-bound at large T
        out["cublas"], graphed["cublas"] = bench_ms(
            lambda: torch_moe.loop_moe(x, w13, w2, w, ids, dtype=torch.bfloat16), False,
            iters=10, warmup=2)
    del w13, w2, tri, fns
    torch.cuda.empty_cache()
    return out, graphed, eager


def check_max(args, shape):
    """--check-max-tokens: '64' for every shape, or 'deepseek_v3=8,default=64'."""
    if "=" not in args.check_max_tokens:
        return args.check_max_tokens
    pairs = dict(kv.split("=") for kv in args.check_max_tokens.split(","))
    return pairs.get(shape, pairs.get("default", "64"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moe", default="build/bin/moe")
    ap.add_argument("--peers", default=".peers")
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="qwen3_30b_a3b,mixtral_8x7b,deepseek_v3,inkling_like")
    ap.add_argument("--tokens", default="1,8,64,512,4096,16384")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--check-max-tokens", default="64",
                    help="CPU reference check up to this T (per shape: name=T,... or one value)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    routing_dir = os.path.join(args.out, "routing")
    os.makedirs(routing_dir, exist_ok=True)
    device = torch.cuda.get_device_name(0)
    # A fresh file per run: moe bench appends, and rows of an earlier run must never be paired
    # with this run's peers.
    jsonl = os.path.join(args.out, "ours.jsonl")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    records = []
    for shape in args.shapes.split(","):
        cfg = f"configs/bench/{shape}_bf16.yaml"
        t0 = time.time()
        cmd = [args.moe, "bench", "--config", cfg, "--tokens", args.tokens, "--jsonl", jsonl,
               "--device", device, "--commit", args.commit, "--shape", shape,
               "--dump-routing", routing_dir, "--check-max-tokens", check_max(args, shape)]
        print(" ".join(cmd), flush=True)
        res = subprocess.run(cmd, capture_output=True, text=True)
        print(res.stdout, res.stderr[-2000:], flush=True)
        print(f"{shape}: moe bench {time.time() - t0:.0f} s", flush=True)
        if res.returncode != 0:
            sys.exit(f"moe bench failed for {shape} (exit {res.returncode}): no grid is written")
    with open(jsonl) as f:
        records = [json.loads(line) for line in f]
    wanted = {(s, int(t)) for s in args.shapes.split(",") for t in args.tokens.split(",")}
    got = {(r["shape"], r["tokens"]) for r in records}
    if got != wanted or any(r.get("commit") != args.commit for r in records):
        sys.exit(f"moe bench wrote points {sorted(got)} of commit(s) "
                 f"{sorted({r.get('commit') for r in records})}; expected {sorted(wanted)} "
                 f"of {args.commit}")
    for rec in records:
        routing = os.path.join(routing_dir, f"{rec['shape']}_{rec['tokens']}.safetensors")
        t0 = time.time()
        try:
            rec["peers"], rec["peers_graph"], rec["peers_eager"] = peers_for(
                rec, routing, args.peers)
        except Exception as e:  # a peer that cannot run a point is recorded, not fatal
            rec["peers"] = {"error": str(e)[:200]}
        best = min((v for k, v in rec["peers"].items() if k != "error"), default=None)
        rec["ratio_to_best_peer"] = rec["ms"] / best if best else None
        best_eager = min(rec.get("peers_eager", {}).values(), default=None)
        if rec.get("ms_stream") is not None and best_eager:
            rec["ratio_to_best_peer_eager"] = rec["ms_stream"] / best_eager
        print(f"{rec['shape']} T={rec['tokens']}: ours {rec['ms']:.4f} ms, peers "
              f"{ {k: round(v, 4) if isinstance(v, float) else v for k, v in rec['peers'].items()} }"
              f" ({time.time() - t0:.0f} s)", flush=True)
    date = time.strftime("%Y-%m-%d")
    final = os.path.join(args.out, f"{date}_trtllm_style_bf16_grid.jsonl")
    with open(final, "w") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    stem = os.path.join(args.out, f"{date}_trtllm_style_bf16_grid")
    grid_report.write_markdown(records, stem + ".md", device, date, args.commit)
    grid_report.write_plot(records, stem + ".png")
    print(grid_report.table(records))

if __name__ == "__main__":
    main()
