#!/usr/bin/env python3
"""The grid's markdown table and plot from its JSON Lines records (bench/run_grid.py writes them;
this file needs neither torch nor a GPU, so a saved grid can be rendered again anywhere):

    python3 bench/grid_report.py bench/results/2026-11-29_trtllm_style_bf16_grid_v1.jsonl

The columns follow the records: the backend that ran them (records of the first grids name none:
trtllm_style); the peers of their format: bf16 grids compare with torch._grouped_mm, the Triton
bf16 MoE and cuBLAS, fp8_block grids with torch._scaled_grouped_mm (rowwise) and the Triton fp8
block-scale MoE; and, where the records carry bf16_backend_ms (deepgemm_style fp8_block,
cutlass_mega bf16), trtllm_style bf16 timed in the same run: its time, its ratio to its floor and
ours to it; and, where they carry rivals (cutlass_mega fp8_block: deepgemm_style), each rival's
time on our configs in the same run and ours to it.
"""
import argparse
import json
import os
import subprocess

# Peers per record format (docs/design.md §8; "triton" is the Triton kernel of that format).
PEERS_BY_FORMAT = {
    "bf16": ("torch_grouped_mm", "triton", "cublas"),
    "fp8_block": ("torch_scaled_grouped_mm", "triton"),
    "fp8_tensor": ("torch_scaled_grouped_mm", "triton"),  # the same fp8 peers (run_grid.py)
    # 4-bit weights: the bf16 peers on the shape's bf16 weights (no peer reads fp4 on Hopper).
    "mxfp4": ("torch_grouped_mm", "triton", "cublas"),
    "nvfp4": ("torch_grouped_mm", "triton", "cublas"),
    "mxfp8": ("torch_grouped_mm", "triton", "cublas"),  # weight-only: bf16 activations
}
PEERS = PEERS_BY_FORMAT["bf16"]


def grid_format(records):
    """The one format of a grid's records (records without one are bf16, the first grids')."""
    formats = {r.get("format", "bf16") for r in records}
    if len(formats) != 1:
        raise ValueError(f"a grid has one format; these records have {sorted(formats)}")
    fmt = formats.pop()
    if fmt not in PEERS_BY_FORMAT:
        raise ValueError(f"no peers known for format {fmt!r} (known: {sorted(PEERS_BY_FORMAT)})")
    return fmt


def grid_backend(records):
    return records[0].get("backend", "trtllm_style") if records else "trtllm_style"


def bf16_backend(records):
    """The backend timed next to ours in the same run (records written before they named it:
    trtllm_style), or None when no record has its time."""
    timed = [r for r in records if r.get("bf16_backend_ms") is not None]
    return timed[0].get("bf16_backend", "trtllm_style") if timed else None


def rivals(records):
    """The backends timed on our configs in the same run (rivals[name] = {ms, ratio, ...})."""
    return sorted({name for r in records for name in r.get("rivals", {})})


def _ms(v):
    return f"{v:.4f}" if isinstance(v, float) else "-"


def peers_graph_cell(rec, peers=PEERS):
    """Which peers were timed as replayed CUDA graphs (the rest ran eagerly)."""
    graphed = rec.get("peers_graph") or {}
    if not graphed:
        return "-"
    on = [p for p in peers if graphed.get(p)]
    return ", ".join(on) if on else "none (eager)"


def _x_floor(ms, floor_ms):
    return f"{ms / floor_ms:.2f}" if isinstance(ms, (int, float)) and floor_ms else "-"


def best_peer_ms(rec):
    return min((v for k, v in rec.get("peers", {}).items() if k != "error"), default=None)


def base_label(backend, base, rival_names=()):
    """The name of the bf16 backend's columns: `base`, or `base bf16` where the grid's backend or
    one of its rivals is the same one in another format (trtllm_style's weight-only grids, and
    cutlass_mega's 4-bit ones with trtllm_style's 4-bit path beside), so that no two columns share
    a name."""
    return f"{base} bf16" if base == backend or base in rival_names else base


def columns(fmt, backend="trtllm_style", base=None, rival_names=()):
    """(header, cell of a record) per column of a grid of format fmt run by backend, with base
    (the backend timed next to it, bf16_backend_ms) when there is one, and each rival's time and
    our ratio to it."""
    peers = PEERS_BY_FORMAT[fmt]
    cols = [("shape", lambda r: f"{r['shape']}"), ("T", lambda r: f"{r['tokens']}"),
            (f"{backend} ms", lambda r: f"{r['ms']:.4f}")]
    cols += [(p, lambda r, p=p: _ms(r.get("peers", {}).get(p))) for p in peers]
    cols += [("floor ms", lambda r: f"{r['floor_ms']:.4f}"),
             ("x floor", lambda r: f"{r['ms'] / r['floor_ms']:.2f}"),
             ("x best peer", lambda r: _ms(r.get("ratio_to_best_peer"))),
             ("best peer x floor", lambda r: _x_floor(best_peer_ms(r), r["floor_ms"]))]
    if base:  # what the user would run instead, timed in the same run
        name = base_label(backend, base, rival_names)
        cols += [(f"{name} ms", lambda r: _ms(r.get("bf16_backend_ms"))),
                 (f"{name} x floor",
                  lambda r: _x_floor(r.get("bf16_backend_ms"), r.get("bf16_backend_floor_ms"))),
                 (f"x {name}", lambda r: _ms(r.get("ratio_to_bf16_backend")))]
    for name in rival_names:
        cols += [(f"{name} ms", lambda r, n=name: _ms(r.get("rivals", {}).get(n, {}).get("ms"))),
                 (f"x {name}", lambda r, n=name: _ms(r.get("rivals", {}).get(n, {}).get("ratio")))]
    cols += [("TFLOP/s", lambda r: f"{r['tflops']:.1f}"),
             (f"{backend} graph", lambda r: "yes" if r["graph"] else "no"),
             ("peers graph", lambda r: peers_graph_cell(r, peers)),
             ("x best peer, all eager", lambda r: _ms(r.get("ratio_to_best_peer_eager")))]
    return cols


def table(records):
    cols = columns(grid_format(records), grid_backend(records), bf16_backend(records),
                   rivals(records))
    lines = ["| " + " | ".join(h for h, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in records:
        lines.append("| " + " | ".join(cell(r) for _, cell in cols) + " |")
    return "\n".join(lines)


def prepare_lines(records):
    """Per shape, the time `moe bench` took to prepare the layer (weights -> layer, upload
    included); records written before it measured this have no prepare_ms."""
    first = {}
    for r in records:
        if r.get("prepare_ms") is not None:
            first.setdefault(r["shape"], r)
    return [f"- {shape}: {r['prepare_ms']:.0f} ms for {r.get('prepare_bytes', 0) / 1e9:.3f} GB"
            for shape, r in first.items()]


def peer_error_lines(records):
    """Per point, the peers that could not run it and why (peers["error"]: "name: error; ...",
    or one error for the point where the peers could not be set up); their cells are '-'."""
    return [f"- {r['shape']} T={r['tokens']}: {r['peers']['error']}" for r in records
            if r.get("peers", {}).get("error")]


def current_commit():
    """The checkout's short HEAD, or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
        return out.stdout.strip() if out.returncode == 0 else None
    except OSError:
        return None


def bf16_backend_note(records, backend, base):
    """What the columns of the backend timed next to ours hold, and where its routing differed."""
    name = base_label(backend, base, rivals(records))
    note = (f" '{name} ms': {base} bf16 (`moe bench` on configs/bench/<shape>_bf16.yaml) timed "
            f"in the same run, what a user would run instead of {backend}; '{name} x floor': its "
            f"time / its own floor (bf16 weight bytes); 'x {name}': {backend} / {name}. The peers "
            f"ran on {backend}'s routing (`moe bench --dump-routing`).")
    differ = [f"{r['shape']} T={r['tokens']}" for r in records
              if r.get("bf16_backend_same_routing") is False]
    if differ:
        note += (f" At {len(differ)} point(s) {name}'s routing differed from {backend}'s "
                 f"({', '.join(differ)}).")
    return note


def rivals_note(records, backend, names):
    """What the rivals' columns hold, and where a rival's routing differed from ours."""
    note = ""
    for name in names:
        note += (f" '{name} ms': {name} on {backend}'s configs (the backend line swapped: the same "
                 f"problem, seed and routing) timed in the same run; 'x {name}': {backend} / "
                 f"{name}.")
        differ = [f"{r['shape']} T={r['tokens']}" for r in records
                  if r.get("rivals", {}).get(name, {}).get("same_routing") is False]
        if differ:
            note += (f" At {len(differ)} point(s) {name}'s routing differed from {backend}'s "
                     f"({', '.join(differ)}).")
    return note


def write_markdown(records, path, device, date, commit, name_checkout=True):
    """name_checkout: say when the records are of another commit than this checkout (re-rendering
    saved records); run_grid, whose records are of the commit it was told, on a device copy whose
    git state may be anything, says nothing."""
    fmt, backend, base = grid_format(records), grid_backend(records), bf16_backend(records)
    note = (f"'x floor', 'x best peer': {backend}'s time over the floor and the best peer's; "
            "'best peer x floor': the fastest peer's time over the floor; "
            f"'{backend} graph': {backend} timed as a replayed CUDA graph; 'peers graph': the "
            "peers that could be captured (the others ran eagerly, launch overhead included); "
            f"'all eager': where graphs were replayed, {backend} and the peers launched one by "
            "one.")
    if base:
        note += bf16_backend_note(records, backend, base)
    note += rivals_note(records, backend, rivals(records))
    head = current_commit() if name_checkout else None
    if head and head != commit:
        note += f" The records are of commit {commit}; this checkout is at {head}."
    prepare = prepare_lines(records)
    errors = peer_error_lines(records)
    with open(path, "w") as f:
        f.write(f"# {backend} {fmt} on {device}, {date}, commit {commit}\n\n{note}\n\n"
                f"{table(records)}\n")
        if errors:
            f.write("\nPeers that failed (their cells are '-'):\n\n" + "\n".join(errors) + "\n")
        if prepare:
            f.write("\nPrepare (weights -> layer, upload included):\n\n" + "\n".join(prepare) +
                    "\n")


def write_plot(records, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("no plot:", e)
        return
    peers, backend = PEERS_BY_FORMAT[grid_format(records)], grid_backend(records)
    base = bf16_backend(records)
    shapes = sorted({r["shape"] for r in records})
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        # By tokens: the lines join the points in order, whatever order the records are in.
        rs = sorted((r for r in records if r["shape"] == shape), key=lambda r: r["tokens"])
        ts = [r["tokens"] for r in rs]
        ax.plot(ts, [r["ms"] * 1e3 for r in rs], "o-", label=backend)
        for peer in peers:
            pts = [(r["tokens"], r["peers"][peer] * 1e3) for r in rs if peer in r.get("peers", {})]
            if pts:
                ax.plot(*zip(*pts), ".--", label=peer)
        base_pts = [(r["tokens"], r["bf16_backend_ms"] * 1e3) for r in rs
                    if r.get("bf16_backend_ms") is not None]
        if base_pts:
            ax.plot(*zip(*base_pts), "s-", alpha=0.5, label=f"{base} bf16")
        for name in rivals(records):
            pts = [(r["tokens"], r["rivals"][name]["ms"] * 1e3) for r in rs
                   if name in r.get("rivals", {})]
            if pts:
                ax.plot(*zip(*pts), "^-", alpha=0.7, label=name)
        ax.plot(ts, [r["floor_ms"] * 1e3 for r in rs], "k:", label="floor")
        ax.set(xscale="log", yscale="log", xlabel="tokens", ylabel="us", title=shape)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jsonl")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args()
    with open(args.jsonl) as f:
        records = [json.loads(line) for line in f if line.strip()]
    if not records:
        raise SystemExit(f"{args.jsonl}: no records")
    stem = os.path.splitext(args.jsonl)[0]
    r0 = records[0]
    write_markdown(records, stem + ".md", r0.get("device", "?"), r0.get("date", "?"),
                   r0.get("commit", "?"))
    if not args.no_plot:
        write_plot(records, stem + ".png")
    print(table(records))


if __name__ == "__main__":
    main()
