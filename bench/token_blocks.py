#!/usr/bin/env python3
"""What a token tile width costs a grouped MoE GEMM whose tiles hold one expert's rows (the
weight-only GEMM's, CUTLASS's): under the benchmark's routing (every token's top-k experts drawn
uniformly, as random router logits give), for each tile width N, the weight tiles streamed per
active expert (`streams`: 1.00 when every expert fits one token block; each extra block of an
expert streams its weights again) and the share of the computed rows that are real
(`efficiency`). A memory-bound point wants streams near 1, a compute-bound one efficiency near 1.

    python3 bench/token_blocks.py --shape deepseek_v3 --tokens 512,1024,2048,4096
    python3 bench/token_blocks.py --experts 8 --top-k 2 --tokens 64,256 --tiles 32,64,128
"""
import argparse
import math
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def shape_of(name):
    """(experts, top_k) of configs/bench/<name>_bf16.yaml."""
    path = os.path.join(HERE, "..", "configs", "bench", f"{name}_bf16.yaml")
    if not os.path.exists(path):
        sys.exit(f"token_blocks: no benchmark config {path} for shape '{name}'")
    with open(path) as f:
        text = f.read()
    found = {}
    for key in ("experts", "top_k"):
        m = re.search(rf"\b{key}:\s*(\d+)", text)
        if not m:
            sys.exit(f"token_blocks: {path} has no {key}")
        found[key] = int(m.group(1))
    return found["experts"], found["top_k"]


def rows_per_expert(experts, top_k, tokens, rng):
    rows = [0] * experts
    for _ in range(tokens):
        for e in rng.sample(range(experts), top_k):
            rows[e] += 1
    return rows


def cost(rows, tile):
    """(weight tiles streamed per active expert, real rows / computed rows) for one routing."""
    blocks = sum(math.ceil(r / tile) for r in rows)
    active = sum(1 for r in rows if r > 0)
    if blocks == 0:
        return 0.0, 0.0
    return blocks / active, sum(rows) / (blocks * tile)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", help="a benchmark shape (configs/bench/<shape>_bf16.yaml)")
    ap.add_argument("--experts", type=int)
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--tokens", required=True, help="comma-separated batch sizes")
    ap.add_argument("--tiles", default="16,32,64,128,256", help="comma-separated tile widths")
    ap.add_argument("--trials", type=int, default=5, help="routings drawn per batch size")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    if a.shape:
        experts, top_k = shape_of(a.shape)
    elif a.experts and a.top_k:
        experts, top_k = a.experts, a.top_k
    else:
        ap.error("give --shape, or --experts and --top-k")
    try:
        tokens = [int(t) for t in a.tokens.split(",")]
        tiles = [int(t) for t in a.tiles.split(",")]
    except ValueError:
        ap.error("--tokens and --tiles take comma-separated integers")
    if not 1 <= top_k <= experts:
        ap.error(f"top_k={top_k} must be in [1, experts={experts}]")
    if min(tokens) < 1 or min(tiles) < 1 or a.trials < 1:
        ap.error("tokens, tiles and trials must be positive")
    rng = random.Random(a.seed)
    print(f"experts={experts} top_k={top_k}, {a.trials} routings each; streams / efficiency")
    print("| T | rows an expert | " + " | ".join(f"N={n}" for n in tiles) + " |")
    print("|---|---|" + "---|" * len(tiles))
    for t in tokens:
        routings = [rows_per_expert(experts, top_k, t, rng) for _ in range(a.trials)]
        cells = []
        for n in tiles:
            costs = [cost(r, n) for r in routings]
            streams = sum(c[0] for c in costs) / len(costs)
            eff = sum(c[1] for c in costs) / len(costs)
            cells.append(f"{streams:.2f} / {eff:.2f}")
        print(f"| {t} | {t * top_k / experts:.1f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
