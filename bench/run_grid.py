#!/usr/bin/env python3
"""Runs a grid of docs/design.md §8 on a GPU: `moe bench` for one of our backends, then the peers
in --peers (torch_moe.py, triton_moe.py) in the same run, on the same layer (the sink experts
included) and the same routings: moe bench dumps every input set it times, and the peers rotate
through them as it does. Writes JSON Lines records with the peers filled in, a markdown table and
a plot (time vs tokens per shape: ours, peers, floor).

    python3 bench/run_grid.py --moe build/bin/moe --peers .peers --out $OUT \
        --shapes qwen3_30b_a3b,mixtral_8x7b --tokens 1,8,64,512,4096,16384
    python3 bench/run_grid.py --moe build/bin/moe --peers .peers --out $OUT --format fp8_block \
        --shapes qwen3_30b_a3b,mixtral_8x7b,deepseek_v3 --tokens 1,8,64,512,4096,16384
    python3 bench/run_grid.py --moe build/bin/moe --peers .peers --out $OUT \
        --format bf16 --backend cutlass_mega --check-max-tokens deepseek_v3=8,default=64

A grid is a format and a backend (--backend defaults to the format's own):
--format bf16 (trtllm_style): configs/bench/<shape>_bf16.yaml against torch._grouped_mm, the tuned
Triton bf16 MoE and per-expert cuBLAS; writes <date>_trtllm_style_bf16_grid.*.
--format fp8_block (deepgemm_style): configs/bench/<shape>_fp8_block.yaml against
torch._scaled_grouped_mm (rowwise) and the Triton fp8 block-scale MoE; writes
<date>_deepgemm_style_fp8_block_grid.*.
--format bf16 --backend cutlass_mega: configs/bench/mega/<shape>_bf16.yaml (max_tokens 512: a
decode kernel) at T = 1..512 against the bf16 peers; writes <date>_cutlass_mega_bf16_grid.*.
--format fp8_block --backend cutlass_mega: configs/bench/mega/<shape>_fp8_block.yaml, the same
token counts, against the fp8 peers and, on the same configs (backend swapped), deepgemm_style;
writes <date>_cutlass_mega_fp8_block_grid.*.
--format fp8_tensor (trtllm_style): configs/bench/<shape>_fp8_tensor.yaml (per-tensor e4m3 weights
and activations) against the fp8 peers above (the Triton one at its 128x128 blocks: there is no
per-tensor Triton MoE among the peers); writes <date>_trtllm_style_fp8_tensor_grid.*.
--format mxfp4 | nvfp4 (cutlass_mega): configs/bench/mega/<shape>_<fmt>.yaml, the same token
counts, against the bf16 peers on the shape's bf16 weights (what runs without a 4-bit path);
writes <date>_cutlass_mega_<fmt>_grid.*.
--format mxfp4 | nvfp4 | mxfp8 --backend trtllm_style (mxfp8's default backend):
configs/bench/trtllm/<shape>_<fmt>.yaml (weight-only on bf16 activations) at every grid size against the same bf16 peers; writes
<date>_trtllm_style_<fmt>_grid.*.
Every grid but trtllm_style's own also times trtllm_style bf16 in the same run, on
configs/bench/<shape>_bf16.yaml (bf16_backend_ms, bf16_backend_floor_ms, ratio_to_bf16_backend):
what a user would run instead.

torch, safetensors and the peers are imported only where the GPU work happens, so the rest of this
file (arguments, configs, record checks and merging) runs anywhere (tests/bench/run_grid_test.py).
"""
import argparse
import collections
import filecmp
import functools
import json
import os
import re
import subprocess
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grid_report  # noqa: E402

# One grid: our backend on `configs`/<shape>_<fmt>.yaml, its default shapes and token counts,
# whether trtllm_style bf16 is timed next to it, and the rivals: other backends of the same format
# timed on our very configs (the backend line swapped). The peers follow the format
# (PEER_RUNNERS, grid_report.PEERS_BY_FORMAT).
Grid = collections.namedtuple("Grid", "backend fmt configs shapes tokens bf16_backend rivals",
                              defaults=((),))
BF16_BACKEND = "trtllm_style"
CONFIGS = "configs/bench"
GRID_TOKENS = "1,8,64,512,4096,16384"  # docs/design.md §8
DECODE_TOKENS = "1,2,4,8,16,32,64,128,512"  # a decode kernel's grid (cutlass_mega, issue 11)
SHAPES = ("qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v3", "inkling_like")  # §8's four
GRIDS = {
    ("bf16", BF16_BACKEND): Grid(
        BF16_BACKEND, "bf16", CONFIGS,
        SHAPES, GRID_TOKENS, False),
    ("fp8_block", "deepgemm_style"): Grid(
        "deepgemm_style", "fp8_block", CONFIGS,
        SHAPES, GRID_TOKENS, True),
    ("fp8_tensor", BF16_BACKEND): Grid(
        BF16_BACKEND, "fp8_tensor", CONFIGS, ("qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v3"),
        GRID_TOKENS, True),
    # The second fp8_block backend: deepgemm_style, the first, timed beside it.
    ("fp8_block", BF16_BACKEND): Grid(
        BF16_BACKEND, "fp8_block", CONFIGS + "/trtllm",
        SHAPES, GRID_TOKENS, True, ("deepgemm_style",)),
    # A decode kernel: its configs hold max_tokens 512 (its schedule's 4096 slots at top_k 8).
    ("bf16", "cutlass_mega"): Grid(
        "cutlass_mega", "bf16", CONFIGS + "/mega",
        SHAPES, DECODE_TOKENS, True),
    ("fp8_block", "cutlass_mega"): Grid(
        "cutlass_mega", "fp8_block", CONFIGS + "/mega",
        SHAPES, DECODE_TOKENS, True,
        ("deepgemm_style",)),
    # 4-bit weights: the peers are the bf16 ones on the shape's bf16 weights (the dequantised
    # weights a user without a 4-bit path runs); trtllm_style's weight-only path is the rival.
    ("mxfp4", "cutlass_mega"): Grid(
        "cutlass_mega", "mxfp4", CONFIGS + "/mega",
        SHAPES, DECODE_TOKENS, True, ("trtllm_style",)),
    ("nvfp4", "cutlass_mega"): Grid(
        "cutlass_mega", "nvfp4", CONFIGS + "/mega",
        SHAPES, DECODE_TOKENS, True, ("trtllm_style",)),
    # trtllm_style's weight-only 4-bit path at every size, trtllm_style bf16 beside it.
    ("mxfp4", BF16_BACKEND): Grid(
        BF16_BACKEND, "mxfp4", CONFIGS + "/trtllm",
        SHAPES, GRID_TOKENS, True),
    ("nvfp4", BF16_BACKEND): Grid(
        BF16_BACKEND, "nvfp4", CONFIGS + "/trtllm",
        SHAPES, GRID_TOKENS, True),
    ("mxfp8", BF16_BACKEND): Grid(
        BF16_BACKEND, "mxfp8", CONFIGS + "/trtllm",
        SHAPES, GRID_TOKENS, True),
}
# The backend of --format when --backend is not given.
DEFAULT_BACKEND = {"bf16": BF16_BACKEND, "fp8_block": "deepgemm_style",
                   "fp8_tensor": BF16_BACKEND, "mxfp4": "cutlass_mega", "nvfp4": "cutlass_mega",
                   "mxfp8": BF16_BACKEND}
# Shapes a grid's backend refuses, and why (there is no config for them).
REFUSED = {
    ("fp8_tensor", BF16_BACKEND, "inkling_like"):
        "inkling_like's sink experts are bf16, and trtllm_style's e4m3 GEMMs cannot run them",
}


def bench_ms(fns, graph, iters=50, warmup=10):
    """Median ms of a call with CUDA events, the calls fns (one per input set) run in rotation as
    moe bench rotates its sets, so the peers read their weights from HBM as ours do; graph=True
    replays one CUDA graph per set, in the same rotation, when the calls can be captured (the
    torch peers copy host tensors and cannot: then they are timed eagerly, and say so)."""
    import torch
    if graph:
        try:
            return _bench(fns, True, iters, warmup), True
        except Exception:
            torch.cuda.synchronize()
    return _bench(fns, False, iters, warmup), False


def _bench(fns, graph, iters, warmup):
    import torch
    if graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for fn in fns:
                for _ in range(3):
                    fn()
        torch.cuda.current_stream().wait_stream(s)
        runs = []
        for fn in fns:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            runs.append(g.replay)
    else:
        runs = fns
    for i in range(warmup):
        runs[i % len(runs)]()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        runs[i % len(runs)]()
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return times[len(times) // 2]


def peer_inputs(rec, routing_files):
    """The peers' layer for this point: the routings moe bench dumped, one per input set it timed
    (topk_ids and topk_weights [T, k + S]: k routed columns, then the S sinks' ids E + s and
    gammas), each with its own bf16 activations; the canonical weights (w13 [E, 2I, H], w2
    [E, H, I], scaled like a trained layer's; the same for every format, which quantises them as
    its peer script says) and the sinks' (bf16, silu_mul, width Is = sink_intermediate: sink_w13
    [S, 2Is, H], sink_w2 [S, H, Is]; None without sinks)."""
    import torch
    from safetensors.torch import load_file
    E, H, I = rec["experts"], rec["hidden"], rec["intermediate"]
    T, k = rec["tokens"], rec["top_k"]
    S, Is = rec["sink_experts"], rec["sink_intermediate"]
    torch.manual_seed(0)
    sets = []
    for f in routing_files:
        r = load_file(f)
        x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
        sets.append((x, r["topk_weights"].cuda(), r["topk_ids"].cuda()))
    w13 = (torch.randn(E, 2 * I, H, device="cuda", dtype=torch.bfloat16) * H ** -0.5)
    w2 = (torch.randn(E, H, I, device="cuda", dtype=torch.bfloat16) * I ** -0.5)
    sink_w13 = sink_w2 = None
    if S:
        sink_w13 = torch.randn(S, 2 * Is, H, device="cuda", dtype=torch.bfloat16) * H ** -0.5
        sink_w2 = torch.randn(S, H, Is, device="cuda", dtype=torch.bfloat16) * Is ** -0.5
    return types.SimpleNamespace(experts=E, top_k=k, intermediate=I, sink_intermediate=Is,
                                 sets=sets, w13=w13, w2=w2, sink_w13=sink_w13, sink_w2=sink_w2)


def layer_calls(layer, routed, sinks=None):
    """One call per input set computing the whole layer with one peer: routed(w13, w2) makes the
    peer's callable (x, topk_weights, topk_ids) over those experts. The sinks run on every token,
    weighted by their gammas: as experts E.. of the same call where they have the routed experts'
    width and the peer's form (sinks None: a bf16 peer); else in a second call, by
    sinks(sink_w13, sink_w2) (a quantised peer's bf16 form: the sinks are bf16 in our layer too;
    default: routed), added to the output and timed with it. The routing's columns are split
    here, outside the timed calls."""
    import torch
    k, E = layer.top_k, layer.experts
    if layer.sink_w13 is None:
        f = routed(layer.w13, layer.w2)
        return [functools.partial(f, x, w[:, :k].contiguous(), ids[:, :k].contiguous())
                for x, w, ids in layer.sets]
    if sinks is None and layer.sink_intermediate == layer.intermediate:
        f = routed(torch.cat([layer.w13, layer.sink_w13]), torch.cat([layer.w2, layer.sink_w2]))
        return [functools.partial(f, x, w, ids) for x, w, ids in layer.sets]
    f, g = routed(layer.w13, layer.w2), (sinks or routed)(layer.sink_w13, layer.sink_w2)

    def call(x, rw, rids, sw, sids):
        return f(x, rw, rids) + g(x, sw, sids)
    return [functools.partial(call, x, w[:, :k].contiguous(), ids[:, :k].contiguous(),
                              w[:, k:].contiguous(), (ids[:, k:] - E).contiguous())
            for x, w, ids in layer.sets]


# A peer to time: make() builds its calls, one per input set (layer_calls); eager_only: never
# captured, and fewer iterations (cuBLAS: per-expert matmuls in a Python loop, host-bound).
Peer = collections.namedtuple("Peer", "make eager_only", defaults=(False,))


def time_peers(peers, graph):
    """Times each peer on its own: one that fails to build or to run is named with its error in
    out["error"] ("name: error; ..."), and the others are still timed. Where moe bench replayed a
    graph (graph), every peer also has an eager time (eager), like with like: its own time where
    it ran eagerly anyway."""
    import torch
    out, graphed, eager, errors = {}, {}, {}, []
    for name, peer in peers.items():
        try:
            fns = peer.make()
            if peer.eager_only:
                ms, was_graphed = bench_ms(fns, False, iters=10, warmup=2)
            else:
                ms, was_graphed = bench_ms(fns, graph)
            ms_eager = (bench_ms(fns, False)[0] if was_graphed else ms) if graph else None
        except Exception as e:  # this peer cannot run the point: say so, time the others
            errors.append(f"{name}: {str(e)[:200]}")
            continue
        finally:
            fns = None  # its weights and buffers go before the next peer's are made
            torch.cuda.empty_cache()
        out[name], graphed[name] = ms, was_graphed
        if graph:
            eager[name] = ms_eager
    if errors:
        out["error"] = "; ".join(errors)
    return out, graphed, eager


def peers_for(rec, routing_files, peers_dir):
    """bf16 peers: torch._grouped_mm, the tuned Triton bf16 MoE and, up to T=4096, cuBLAS
    (per-expert matmuls in a Python loop: slow and host-bound at large T), each on the whole
    layer."""
    import torch
    sys.path.insert(0, peers_dir)
    import torch_moe
    import triton_moe
    layer = peer_inputs(rec, routing_files)

    def grouped(w13, w2):
        return lambda x, w, ids: torch_moe.grouped_mm_moe(x, w13, w2, w, ids)

    def loop(w13, w2):
        return lambda x, w, ids: torch_moe.loop_moe(x, w13, w2, w, ids, dtype=torch.bfloat16)
    peers = {"torch_grouped_mm": Peer(lambda: layer_calls(layer, grouped)),
             "triton": Peer(lambda: layer_calls(layer, triton_moe.TritonMoE))}
    if rec["tokens"] <= 4096:
        peers["cublas"] = Peer(lambda: layer_calls(layer, loop), eager_only=True)
    return time_peers(peers, rec["graph"])


def fp8_block_peers(layer, torch_moe, triton_moe):
    """fp8 peers from bf16 canonical weights, quantised as the peer scripts do: rowwise e4m3 for
    torch._scaled_grouped_mm, 128x128 block scales for the Triton kernel (both quantise the
    activations inside the timed call: per row, and per token per 128 channels). The sinks stay
    bf16, as in our layer: each peer runs them in its bf16 form (torch._grouped_mm, the Triton
    bf16 MoE)."""
    def scaled(w13, w2):
        q13, s13, q2, s2 = torch_moe.quantize_rowwise_experts(w13, w2)
        return lambda x, w, ids: torch_moe.scaled_grouped_moe(x, q13, s13, q2, s2, w, ids)

    def block(w13, w2):
        return triton_moe.TritonMoEFp8Block(*triton_moe.quantize_block_experts(w13, w2))

    def grouped(w13, w2):
        return lambda x, w, ids: torch_moe.grouped_mm_moe(x, w13, w2, w, ids)
    return {"torch_scaled_grouped_mm": Peer(lambda: layer_calls(layer, scaled, grouped)),
            "triton": Peer(lambda: layer_calls(layer, block, triton_moe.TritonMoE))}


def peers_for_fp8_block(rec, routing_files, peers_dir):
    """fp8_block peers: torch._scaled_grouped_mm (rowwise) and the Triton fp8 block-scale MoE.
    A peer that fails is named in peers["error"]; the other is still timed."""
    sys.path.insert(0, peers_dir)
    import torch_moe
    import triton_moe
    layer = peer_inputs(rec, routing_files)
    return time_peers(fp8_block_peers(layer, torch_moe, triton_moe), rec["graph"])


PEER_RUNNERS = {"bf16": peers_for, "fp8_block": peers_for_fp8_block,
                "fp8_tensor": peers_for_fp8_block, "mxfp4": peers_for, "nvfp4": peers_for,
                "mxfp8": peers_for}


def check_max(args, shape):
    """--check-max-tokens: '64' for every shape, or 'deepseek_v3=8,default=64'."""
    if "=" not in args.check_max_tokens:
        return args.check_max_tokens
    pairs = dict(kv.split("=") for kv in args.check_max_tokens.split(","))
    return pairs.get(shape, pairs.get("default", "64"))


def config_path(shape, fmt, configs=CONFIGS):
    return f"{configs}/{shape}_{fmt}.yaml"


def grid_configs(grid, shape):
    """Ours, then trtllm_style bf16's where the grid times it."""
    ours = config_path(shape, grid.fmt, grid.configs)
    return [ours, config_path(shape, "bf16")] if grid.bf16_backend else [ours]


def grid_name(grid):
    return f"--format {grid.fmt} --backend {grid.backend}"


def config_max_tokens(path):
    """The config's problem max_tokens (the largest batch moe bench may run), or None."""
    with open(path) as f:
        m = re.search(r"\bmax_tokens:\s*(\d+)", f.read())
    return int(m.group(1)) if m else None


def shapes_for(grid, shapes, tokens, root="."):
    """The shapes to run: --shapes, or the grid's defaults. A shape the grid's backend refuses, one
    without a config, or a token count above a config's max_tokens is an error before anything
    runs."""
    wanted = shapes.split(",") if shapes else list(grid.shapes)
    known = f"{grid_name(grid)} shapes: {','.join(grid.shapes)}"
    for shape in wanted:
        why = REFUSED.get((grid.fmt, grid.backend, shape))
        if why:
            sys.exit(f"{grid_name(grid)} --shapes {shape}: {why}; {known}")
        for cfg in grid_configs(grid, shape):
            if not os.path.exists(os.path.join(root, cfg)):
                sys.exit(f"{grid_name(grid)} --shapes {shape}: no {cfg} (run from the repository "
                         f"root; {known})")
            cap = config_max_tokens(os.path.join(root, cfg))
            over = [t for t in tokens.split(",") if cap is not None and int(t) > cap]
            if over:
                sys.exit(f"{grid_name(grid)} --tokens {','.join(over)}: above max_tokens={cap} "
                         f"of {cfg} (default tokens: {grid.tokens})")
    return wanted


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="A docs/design.md §8 grid on a GPU: one of our backends and its peers, same "
                    "routing")
    ap.add_argument("--moe", default="build/bin/moe")
    ap.add_argument("--peers", default=".peers")
    ap.add_argument("--out", required=True)
    ap.add_argument("--format", default="bf16", choices=sorted(DEFAULT_BACKEND),
                    help="the weights' format: its peers (bf16: torch._grouped_mm, Triton, cuBLAS; "
                         "fp8_block and fp8_tensor: torch._scaled_grouped_mm, Triton fp8 block)")
    ap.add_argument("--backend", default=None,
                    choices=sorted({g.backend for g in GRIDS.values()}),
                    help="our backend (default: the format's: "
                         + ", ".join(f"{f}: {b}" for f, b in DEFAULT_BACKEND.items())
                         + "); any but trtllm_style is timed next to trtllm_style bf16")
    ap.add_argument("--shapes", default=None,
                    help="comma-separated (default: every shape the grid's backend accepts: "
                         + "; ".join(f"{g.backend} {g.fmt}: {','.join(g.shapes)}"
                                     for g in GRIDS.values()) + ")")
    ap.add_argument("--tokens", default=None,
                    help="comma-separated (default: the grid's: "
                         + "; ".join(f"{g.backend} {g.fmt}: {g.tokens}" for g in GRIDS.values())
                         + ")")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--check-max-tokens", default="64",
                    help="CPU reference check up to this T (per shape: name=T,... or one value)")
    args = ap.parse_args(argv)
    backend = args.backend or DEFAULT_BACKEND[args.format]
    if (args.format, backend) not in GRIDS:
        ap.error(f"no {backend} {args.format} grid (grids: "
                 + ", ".join(f"--format {f} --backend {b}" for f, b in GRIDS) + ")")
    args.backend, args.grid = backend, GRIDS[args.format, backend]
    args.tokens = args.tokens or args.grid.tokens
    return args


def grid_tag(grid):
    """The grid in per-run file names: its format for the format's own backend (the names the
    first grids used), else backend_format."""
    return grid.fmt if DEFAULT_BACKEND[grid.fmt] == grid.backend else f"{grid.backend}_{grid.fmt}"


def paths(out, grid):
    """Per-run files under --out: our records, the peers' routing dir; where trtllm_style bf16 is
    timed too, its records and its routing (compared with ours, never read by the peers)."""
    tag = grid_tag(grid)
    if tag == "bf16":
        return {"jsonl": os.path.join(out, "ours.jsonl"), "routing": os.path.join(out, "routing")}
    files = {"jsonl": os.path.join(out, f"ours_{tag}.jsonl"),
             "routing": os.path.join(out, f"routing_{tag}")}
    if grid.bf16_backend:
        files.update(bf16_jsonl=os.path.join(out, f"bf16_backend_{tag}.jsonl"),
                     bf16_routing=os.path.join(out, f"routing_{tag}_bf16_backend"))
    for rival in grid.rivals:
        files[f"{rival}_jsonl"] = os.path.join(out, f"rival_{rival}_{tag}.jsonl")
        files[f"{rival}_routing"] = os.path.join(out, f"routing_{tag}_{rival}")
    return files


def rival_config(out, ours, rival):
    """Our config with its backend line naming `rival` (the same problem, seed and routing),
    written under --out."""
    with open(ours) as f:
        text = f.read()
    swapped, n = re.subn(r"^backend:\s*\S+", f"backend: {rival}", text, flags=re.M)
    if n != 1:
        sys.exit(f"{ours}: no single 'backend:' line to name {rival} in")
    path = os.path.join(out, f"{os.path.splitext(os.path.basename(ours))[0]}_{rival}.yaml")
    with open(path, "w") as f:
        f.write(swapped)
    return path


def routing_file(routing_dir, shape, tokens, input_set):
    """moe bench --dump-routing's file of one input set of a point."""
    return os.path.join(routing_dir, f"{shape}_{tokens}_{input_set}.safetensors")


def routing_files(routing_dir, shape, tokens):
    """Every input set's routing file of a point found in routing_dir, in set order."""
    if not os.path.isdir(routing_dir):
        return []
    name = re.compile(re.escape(f"{shape}_{tokens}_") + r"(\d+)\.safetensors$")
    found = sorted((int(m.group(1)), f) for f in os.listdir(routing_dir) if (m := name.match(f)))
    return [os.path.join(routing_dir, f) for _, f in found]


def remove_stale(files):
    """moe bench appends to --jsonl and overwrites dumps: files of an earlier run must never be
    paired with this run's peers."""
    for f in files:
        if os.path.exists(f):
            os.remove(f)


def bench_cmd(args, cfg, shape, device, jsonl, routing_dir, check):
    # --strict: a config whose backend refuses the problem fails here rather than timing its
    # fallback (check_records would refuse those records, after the GPU time was spent).
    cmd = [args.moe, "bench", "--strict", "--config", cfg, "--tokens", args.tokens, "--jsonl",
           jsonl, "--device", device, "--commit", args.commit, "--shape", shape]
    return cmd + ["--dump-routing", routing_dir, "--check-max-tokens", check]


def run_bench(cmd, what):
    t0 = time.time()
    print(" ".join(cmd), flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True)
    print(res.stdout, res.stderr[-2000:], flush=True)
    print(f"{what}: moe bench {time.time() - t0:.0f} s", flush=True)
    if res.returncode != 0:
        sys.exit(f"moe bench failed for {what} (exit {res.returncode}): no grid is written")


def read_records(jsonl):
    if not os.path.exists(jsonl):
        sys.exit(f"moe bench wrote no {jsonl}: no grid is written")
    with open(jsonl) as f:
        return [json.loads(line) for line in f]


def check_records(records, shapes, tokens, commit, backend, fmt):
    """Exactly the asked points, of this commit, from the backend and format asked for (a config's
    fallback to another backend must not pass as ours)."""
    wanted = {(s, int(t)) for s in shapes for t in tokens.split(",")}
    got = {(r["shape"], r["tokens"]) for r in records}
    if got != wanted or len(records) != len(wanted) or any(
            r.get("commit") != commit for r in records):
        sys.exit(f"moe bench wrote points {sorted(got)} of commit(s) "
                 f"{sorted({r.get('commit') for r in records})}; expected {sorted(wanted)} "
                 f"of {commit}")
    ran = {(r.get("backend"), r.get("format")) for r in records}
    if ran != {(backend, fmt)}:
        sys.exit(f"moe bench ran (backend, format) {sorted(ran, key=str)}; expected "
                 f"{(backend, fmt)}: no grid is written")


def add_bf16_backend(records, bf16_records, same_routing):
    """bf16_backend (its name), bf16_backend_ms, bf16_backend_floor_ms (its own floor: bf16 bytes)
    and ratio_to_bf16_backend (ours / it) per record, from the bf16 backend's record of the same
    point; same_routing(shape, tokens) says whether both dumped the same."""
    by_point = {(b["shape"], b["tokens"]): b for b in bf16_records}
    for rec in records:
        b = by_point[rec["shape"], rec["tokens"]]
        rec["bf16_backend"] = b["backend"]
        rec["bf16_backend_ms"] = b["ms"]
        rec["bf16_backend_floor_ms"] = b["floor_ms"]
        rec["ratio_to_bf16_backend"] = rec["ms"] / b["ms"]
        rec["bf16_backend_same_routing"] = same_routing(rec["shape"], rec["tokens"])


def add_rival(records, rival, rival_records, same_routing):
    """rivals[rival] = {ms, ratio (ours / its), same_routing} per record, from the rival's record
    of the same point."""
    by_point = {(b["shape"], b["tokens"]): b for b in rival_records}
    for rec in records:
        b = by_point[rec["shape"], rec["tokens"]]
        rec.setdefault("rivals", {})[rival] = {
            "ms": b["ms"], "ratio": rec["ms"] / b["ms"],
            "same_routing": same_routing(rec["shape"], rec["tokens"])}


def same_routing_files(dir_a, dir_b):
    """Both dumps of a point byte for byte equal, every input set (moe bench writes the same
    tensors the same way)."""
    def same(shape, tokens):
        a, b = routing_files(dir_a, shape, tokens), routing_files(dir_b, shape, tokens)
        return (bool(a) and [os.path.basename(f) for f in a] == [os.path.basename(f) for f in b]
                and all(filecmp.cmp(fa, fb, shallow=False) for fa, fb in zip(a, b)))
    return same


def add_peer_ratios(rec):
    best = min((v for k, v in rec["peers"].items() if k != "error"), default=None)
    rec["ratio_to_best_peer"] = rec["ms"] / best if best else None
    best_eager = min(rec.get("peers_eager", {}).values(), default=None)
    if rec.get("ms_stream") is not None and best_eager:
        rec["ratio_to_best_peer_eager"] = rec["ms_stream"] / best_eager


def grid_stem(out, date, grid):
    return os.path.join(out, f"{date}_{grid.backend}_{grid.fmt}_grid")


def run_benches(args, shapes, device, files):
    """moe bench per shape: ours (dumping the routing the peers read) and, where the grid says so,
    trtllm_style bf16 (its own records; its routing dumped elsewhere, only to compare)."""
    grid = args.grid
    points = [(s, t) for s in shapes for t in args.tokens.split(",")]
    remove_stale([files["jsonl"]] +
                 [f for s, t in points for f in routing_files(files["routing"], s, t)])
    if grid.bf16_backend:
        remove_stale([files["bf16_jsonl"]] +
                     [f for s, t in points for f in routing_files(files["bf16_routing"], s, t)])
    for rival in grid.rivals:
        rival_dir = files[f"{rival}_routing"]
        remove_stale([files[f"{rival}_jsonl"]] +
                     [f for s, t in points for f in routing_files(rival_dir, s, t)])
    dirs = [files["routing"], files.get("bf16_routing")]
    for d in dirs + [files[f"{rival}_routing"] for rival in grid.rivals]:
        if d:
            os.makedirs(d, exist_ok=True)
    for shape in shapes:
        ours, *bf16 = grid_configs(grid, shape)
        run_bench(bench_cmd(args, ours, shape, device, files["jsonl"], files["routing"],
                            check_max(args, shape)), shape)
        if bf16:  # timing only: the trtllm_style bf16 grid checks its outputs
            run_bench(bench_cmd(args, bf16[0], shape, device, files["bf16_jsonl"],
                                files["bf16_routing"], "0"), f"{shape} ({BF16_BACKEND} bf16)")
        for rival in grid.rivals:  # timing only: its own grid checks its outputs
            run_bench(bench_cmd(args, rival_config(args.out, ours, rival), shape, device,
                                files[f"{rival}_jsonl"], files[f"{rival}_routing"], "0"),
                      f"{shape} ({rival})")


def main(argv=None):
    args = parse_args(argv)
    grid = args.grid
    shapes = shapes_for(grid, args.shapes, args.tokens)
    import torch
    os.makedirs(args.out, exist_ok=True)
    device = torch.cuda.get_device_name(0)
    files = paths(args.out, grid)
    run_benches(args, shapes, device, files)
    records = read_records(files["jsonl"])
    check_records(records, shapes, args.tokens, args.commit, grid.backend, grid.fmt)
    if grid.bf16_backend:
        bf16_records = read_records(files["bf16_jsonl"])
        check_records(bf16_records, shapes, args.tokens, args.commit, BF16_BACKEND, "bf16")
        add_bf16_backend(records, bf16_records,
                         same_routing_files(files["routing"], files["bf16_routing"]))
        differ = [(r["shape"], r["tokens"]) for r in records if not r["bf16_backend_same_routing"]]
        if differ:
            print(f"warning: {BF16_BACKEND}'s routing differed at {differ}; the peers ran on "
                  f"{grid.backend}'s", flush=True)
    for rival in grid.rivals:
        rival_records = read_records(files[f"{rival}_jsonl"])
        check_records(rival_records, shapes, args.tokens, args.commit, rival, grid.fmt)
        add_rival(records, rival, rival_records,
                  same_routing_files(files["routing"], files[f"{rival}_routing"]))
    for rec in records:
        # Every input set moe bench timed, in its order: the peers rotate through them as it did.
        routings = [routing_file(files["routing"], rec["shape"], rec["tokens"], s)
                    for s in range(rec["input_sets"])]
        t0 = time.time()
        try:
            rec["peers"], rec["peers_graph"], rec["peers_eager"] = PEER_RUNNERS[grid.fmt](
                rec, routings, args.peers)
        except Exception as e:  # peers that cannot set up a point are recorded, not fatal
            rec["peers"] = {"error": str(e)[:200]}
        add_peer_ratios(rec)
        print(f"{rec['shape']} T={rec['tokens']}: {grid.backend} {rec['ms']:.4f} ms, peers "
              f"{ {k: round(v, 4) if isinstance(v, float) else v for k, v in rec['peers'].items()} }"
              f" ({time.time() - t0:.0f} s)", flush=True)
    date = time.strftime("%Y-%m-%d")
    stem = grid_stem(args.out, date, grid)
    with open(stem + ".jsonl", "w") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    grid_report.write_markdown(records, stem + ".md", device, date, args.commit,
                               name_checkout=False)
    grid_report.write_plot(records, stem + ".png")
    print(grid_report.table(records))


if __name__ == "__main__":
    main()
