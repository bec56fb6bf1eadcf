"""bench/grid_report.py renders a saved grid: every record becomes a row with its ratios (to the
floor: ours and the best peer's), and the peers' graph status is said per row (graphed peers by
name, or 'none (eager)'). Columns are named for the backend that ran the records; an fp8_block grid
has the fp8 peers' columns; a grid with trtllm_style timed in the same run (fp8_block's, and
cutlass_mega's bf16 one) has its time, its ratio to its floor and ours to it."""
import json
import os
import subprocess
import sys
import tempfile
import types

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "bench", "grid_report.py")


def report(records):
    """grid_report.py's markdown of `records` (written as a JSONL file first; no plot)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "grid.jsonl")
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records))
        subprocess.run([sys.executable, script, path, "--no-plot"], check=True,
                       stdout=subprocess.DEVNULL)
        return open(os.path.join(d, "grid.md")).read()


def header_names(md):
    """The column names of the grid table's header."""
    header = [l for l in md.splitlines() if l.startswith("| shape |")][0]
    return header, [h.strip() for h in header.strip("|").split("|")]


records = [
    {"shape": "s", "tokens": 1, "ms": 0.2, "floor_ms": 0.1, "tflops": 1.0, "graph": True,
     "peers": {"torch_grouped_mm": 0.4, "triton": 0.5}, "ratio_to_best_peer": 0.5,
     "peers_graph": {"torch_grouped_mm": False, "triton": True}, "device": "D", "date": "X",
     "commit": "c", "ms_stream": 0.3, "peers_eager": {"torch_grouped_mm": 0.4, "triton": 0.6},
     "ratio_to_best_peer_eager": 0.75},
    {"shape": "s", "tokens": 4096, "ms": 3.0, "floor_ms": 1.0, "tflops": 400.0, "graph": False,
     "peers": {"triton": 2.0}, "ratio_to_best_peer": 1.5, "peers_graph": {"triton": False}},
]
md = report(records)
rows = [l for l in md.splitlines() if l.startswith("| s |")]
assert len(rows) == 2, md
assert rows[0] == ("| s | 1 | 0.2000 | 0.4000 | 0.5000 | - | 0.1000 | 2.00 | 0.5000 | 4.00 | 1.0 | "
                   "yes | triton | 0.7500 |"), rows[0]
assert rows[1] == ("| s | 4096 | 3.0000 | - | 2.0000 | - | 1.0000 | 3.00 | 1.5000 | 2.00 | 400.0 | "
                   "no | none (eager) | - |"), rows[1]
assert "# trtllm_style bf16 on D, X, commit c" in md, md
# Records without a backend are the first grids' (trtllm_style); none has trtllm_style's columns.
assert ("| shape | T | trtllm_style ms | torch_grouped_mm | triton | cublas | floor ms | x floor | "
        "x best peer | best peer x floor | TFLOP/s | trtllm_style graph |") in md, md
in_git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True).returncode == 0
assert ("The records are of commit c; this checkout is at" in md) == in_git, md

fp8 = [
    {"shape": "s", "tokens": 1, "ms": 0.2, "floor_ms": 0.1, "tflops": 1.0, "graph": True,
     "backend": "deepgemm_style", "format": "fp8_block", "device": "D", "date": "X", "commit": "c",
     "peers": {"torch_scaled_grouped_mm": 0.4, "triton": 0.25}, "ratio_to_best_peer": 0.8,
     "peers_graph": {"torch_scaled_grouped_mm": True, "triton": True}, "bf16_backend_ms": 0.4,
     "ratio_to_bf16_backend": 0.5, "bf16_backend_same_routing": True},
    {"shape": "s", "tokens": 4096, "ms": 3.0, "floor_ms": 1.0, "tflops": 400.0, "graph": False,
     "backend": "deepgemm_style", "format": "fp8_block",
     "peers": {"error": "torch_scaled_grouped_mm: no", "triton": 2.0}, "ratio_to_best_peer": 1.5,
     "peers_graph": {"triton": False}, "bf16_backend_ms": 4.0, "ratio_to_bf16_backend": 0.75,
     "bf16_backend_same_routing": False},
]
md = report(fp8)
assert "# deepgemm_style fp8_block on D, X, commit c" in md, md
# Saved before the records named the bf16 backend or its floor: trtllm_style, its x floor unknown.
assert ("| shape | T | deepgemm_style ms | torch_scaled_grouped_mm | triton | floor ms | x floor "
        "| x best peer | best peer x floor | trtllm_style ms | trtllm_style x floor | x "
        "trtllm_style | TFLOP/s | deepgemm_style graph | peers graph | x best peer, all eager |"
        ) in md, md
rows = [l for l in md.splitlines() if l.startswith("| s |")]
assert len(rows) == 2, md
assert rows[0] == ("| s | 1 | 0.2000 | 0.4000 | 0.2500 | 0.1000 | 2.00 | 0.8000 | 2.50 | 0.4000 "
                   "| - | 0.5000 | 1.0 | yes | torch_scaled_grouped_mm, triton | - |"), rows[0]
assert rows[1] == ("| s | 4096 | 3.0000 | - | 2.0000 | 1.0000 | 3.00 | 1.5000 | 2.00 | 4.0000 "
                   "| - | 0.7500 | 400.0 | no | none (eager) | - |"), rows[1]
assert "trtllm_style's routing differed from deepgemm_style's (s T=4096)" in md, md

# cutlass_mega bf16 with trtllm_style timed in the same run: both backends and the bf16 peers per
# point, each with its ratio to the floor (trtllm_style's to its own), ours to the best peer and
# to trtllm_style.
mega = [
    {"shape": "s", "tokens": 1, "ms": 0.03, "floor_ms": 0.015, "tflops": 2.0, "graph": True,
     "backend": "cutlass_mega", "format": "bf16", "device": "D", "date": "X", "commit": "c",
     "peers": {"torch_grouped_mm": 0.12, "triton": 0.06, "cublas": 0.3},
     "ratio_to_best_peer": 0.5, "peers_graph": {"torch_grouped_mm": False, "triton": True},
     "bf16_backend": "trtllm_style", "bf16_backend_ms": 0.06, "bf16_backend_floor_ms": 0.015,
     "ratio_to_bf16_backend": 0.5, "bf16_backend_same_routing": True},
    {"shape": "s", "tokens": 512, "ms": 0.9, "floor_ms": 0.3, "tflops": 90.0, "graph": False,
     "backend": "cutlass_mega", "format": "bf16", "peers": {"error": "triton: no"},
     "ratio_to_best_peer": None, "peers_graph": {}, "bf16_backend": "trtllm_style",
     "bf16_backend_ms": 0.45, "bf16_backend_floor_ms": 0.3, "ratio_to_bf16_backend": 2.0,
     "bf16_backend_same_routing": True},
]
md = report(mega)
assert "# cutlass_mega bf16 on D, X, commit c" in md, md
assert ("| shape | T | cutlass_mega ms | torch_grouped_mm | triton | cublas | floor ms | x floor "
        "| x best peer | best peer x floor | trtllm_style ms | trtllm_style x floor | x "
        "trtllm_style | TFLOP/s | cutlass_mega graph | peers graph | x best peer, all eager |"
        ) in md, md
rows = [l for l in md.splitlines() if l.startswith("| s |")]
assert rows == [
    "| s | 1 | 0.0300 | 0.1200 | 0.0600 | 0.3000 | 0.0150 | 2.00 | 0.5000 | 4.00 | 0.0600 | 4.00 | "
    "0.5000 | 2.0 | yes | triton | - |",
    "| s | 512 | 0.9000 | - | - | - | 0.3000 | 3.00 | - | - | 0.4500 | 1.50 | 2.0000 | 90.0 | no "
    "| - | - |"], rows
assert "what a user would run instead of cutlass_mega" in md and "differed" not in md, md

# cutlass_mega fp8_block with a rival (deepgemm_style on the same configs): its time and ours
# over it after trtllm_style's columns, and the points where its routing differed.
rivaled = [dict(mega[0], format="fp8_block",
                peers={"torch_scaled_grouped_mm": 0.12, "triton": 0.06},
                rivals={"deepgemm_style": {"ms": 0.06, "ratio": 0.5, "same_routing": True}}),
           dict(mega[1], format="fp8_block", peers={"error": "no"},
                rivals={"deepgemm_style": {"ms": 0.3, "ratio": 3.0, "same_routing": False}})]
md = report(rivaled)
assert ("| x trtllm_style | deepgemm_style ms | x deepgemm_style | TFLOP/s | cutlass_mega graph |"
        ) in md, md
rows = [l for l in md.splitlines() if l.startswith("| s |")]
assert rows[0].endswith("| 0.5000 | 0.0600 | 0.5000 | 2.0 | yes | triton | - |"), rows[0]
assert rows[1].endswith("| 2.0000 | 0.3000 | 3.0000 | 90.0 | no | - | - |"), rows[1]
assert "At 1 point(s) deepgemm_style's routing differed from cutlass_mega's (s T=512)" in md, md

# trtllm_style's weight-only grid times trtllm_style bf16 beside it: its columns say "bf16", so
# no two columns share a name, and the note and the routing remark name it so too.
weight_only = [dict(mega[0], backend="trtllm_style", format="mxfp4", bf16_backend_same_routing=False)]
md = report(weight_only)
header, names = header_names(md)
assert len(names) == len(set(names)), names
assert ("| trtllm_style ms | torch_grouped_mm | triton | cublas | floor ms | x floor | x best peer "
        "| best peer x floor | trtllm_style bf16 ms | trtllm_style bf16 x floor | x trtllm_style "
        "bf16 | TFLOP/s | trtllm_style graph |") in header, header
assert "'x trtllm_style bf16': trtllm_style / trtllm_style bf16" in md, md
assert "trtllm_style bf16's routing differed from trtllm_style's (s T=1)" in md, md

# cutlass_mega's 4-bit grid: trtllm_style bf16 beside it and trtllm_style's 4-bit path as the
# rival; the bf16 columns say "bf16", the rival's do not, and no two columns share a name.
fp4 = [dict(mega[0], format="mxfp4",
            rivals={"trtllm_style": {"ms": 0.06, "ratio": 0.5, "same_routing": True}})]
md = report(fp4)
header, names = header_names(md)
assert len(names) == len(set(names)), names
assert ("| trtllm_style bf16 ms | trtllm_style bf16 x floor | x trtllm_style bf16 | trtllm_style ms"
        " | x trtllm_style | TFLOP/s |") in header, header
assert "'x trtllm_style bf16': cutlass_mega / trtllm_style bf16" in md, md

# The plot, one panel per shape, draws cutlass_mega, each peer, trtllm_style and the floor
# (matplotlib faked: it is absent on CPU machines).
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
import grid_report  # noqa: E402


class Axes:
    def __init__(self):
        self.lines = []

    def plot(self, xs, ys, style, label=None, **kw):
        self.lines.append((label, list(xs), list(ys)))

    def set(self, **kw):
        self.title = kw.get("title")

    def legend(self, **kw):
        pass


panels, saved = [], []
fig = types.SimpleNamespace(tight_layout=lambda: None,
                            savefig=lambda path, dpi: saved.append(path))


def subplots(rows, cols, figsize, squeeze):
    panels.extend(Axes() for _ in range(cols))
    return fig, [panels]


plt = types.SimpleNamespace(subplots=subplots)
sys.modules["matplotlib"] = types.SimpleNamespace(use=lambda backend: None, pyplot=plt)
sys.modules["matplotlib.pyplot"] = plt
grid_report.write_plot(mega, "grid.png")
assert saved == ["grid.png"] and len(panels) == 1 and panels[0].title == "s", (saved, panels)
lines = {label: (xs, ys) for label, xs, ys in panels[0].lines}
assert list(lines) == ["cutlass_mega", "torch_grouped_mm", "triton", "cublas", "trtllm_style bf16",
                       "floor"], list(lines)
assert lines["cutlass_mega"] == ([1, 512], [30.0, 900.0]), lines
assert lines["trtllm_style bf16"] == ([1, 512], [60.0, 450.0]), lines
assert lines["triton"] == ([1], [60.0]) and lines["floor"] == ([1, 512], [15.0, 300.0]), lines
# Records out of token order (a grid merged from runs) still draw each line left to right.
panels.clear()
grid_report.write_plot(mega[::-1], "grid.png")
lines = {label: (xs, ys) for label, xs, ys in panels[0].lines}
assert lines["cutlass_mega"] == ([1, 512], [30.0, 900.0]), lines
assert lines["floor"] == ([1, 512], [15.0, 300.0]), lines

# Peers that failed at a point are named with their errors under the table, not dropped.
md = report(fp8)
assert "Peers that failed (their cells are '-'):\n\n- s T=4096: torch_scaled_grouped_mm: no\n" \
    in md, md
assert "- s T=512: triton: no\n" in report(mega), report(mega)
assert "Peers that failed" not in report(records), report(records)
print("ok")
