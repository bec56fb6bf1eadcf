#!/usr/bin/env python3
"""The grid's markdown table and plot from its JSON Lines records (bench/run_grid.py writes them;
this file needs neither torch nor a GPU, so a saved grid can be rendered again anywhere):

    python3 bench/grid_report.py bench/results/2026-11-29_trtllm_style_bf16_grid_v1.jsonl
"""
import argparse
import json
import os
import subprocess

PEERS = ("torch_grouped_mm", "triton", "cublas")


def _ms(v):
    return f"{v:.4f}" if isinstance(v, float) else "-"


def peers_graph_cell(rec):
    """Which peers were timed as replayed CUDA graphs (the rest ran eagerly)."""
    graphed = rec.get("peers_graph") or {}
    if not graphed:
        return "-"
    on = [p for p in PEERS if graphed.get(p)]
    return ", ".join(on) if on else "none (eager)"


def table(records):
    lines = ["| shape | T | ours ms | torch_grouped_mm | triton | cublas | floor ms | x floor | "
             "x best peer | TFLOP/s | ours graph | peers graph | x best peer, all eager |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        p = r.get("peers", {})
        lines.append(
            f"| {r['shape']} | {r['tokens']} | {r['ms']:.4f} | {_ms(p.get('torch_grouped_mm'))} | "
            f"{_ms(p.get('triton'))} | {_ms(p.get('cublas'))} | {r['floor_ms']:.4f} | "
            f"{r['ms'] / r['floor_ms']:.2f} | {_ms(r.get('ratio_to_best_peer'))} | "
            f"{r['tflops']:.1f} | {'yes' if r['graph'] else 'no'} | {peers_graph_cell(r)} | "
            f"{_ms(r.get('ratio_to_best_peer_eager'))} |")
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


def current_commit():
    """The checkout's short HEAD, or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
        return out.stdout.strip() if out.returncode == 0 else None
    except OSError:
        return None


def write_markdown(records, path, device, date, commit):
    note = ("'ours graph': our layer timed as a replayed CUDA graph; 'peers graph': the peers "
            "that could be captured (the others ran eagerly, launch overhead included); 'all "
            "eager': where graphs were replayed, ours and the peers launched one by one.")
    head = current_commit()
    if head and head != commit:
        note += f" The records are of commit {commit}; this checkout is at {head}."
    prepare = prepare_lines(records)
    with open(path, "w") as f:
        f.write(f"# trtllm_style bf16 on {device}, {date}, commit {commit}\n\n{note}\n\n"
                f"{table(records)}\n")
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
    shapes = sorted({r["shape"] for r in records})
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        rs = [r for r in records if r["shape"] == shape]
        ts = [r["tokens"] for r in rs]
        ax.plot(ts, [r["ms"] * 1e3 for r in rs], "o-", label="trtllm_style")
        for peer in PEERS:
            pts = [(r["tokens"], r["peers"][peer] * 1e3) for r in rs if peer in r.get("peers", {})]
            if pts:
                ax.plot(*zip(*pts), ".--", label=peer)
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
