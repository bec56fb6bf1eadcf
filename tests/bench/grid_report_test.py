"""bench/grid_report.py renders a saved grid: every record becomes a row with its ratios, and the
peers' graph status is said per row (graphed peers by name, or 'none (eager)'). An fp8_block grid
has the fp8 peers' columns and the bf16 backend's time and ratio."""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "bench", "grid_report.py")
records = [
    {"shape": "s", "tokens": 1, "ms": 0.2, "floor_ms": 0.1, "tflops": 1.0, "graph": True,
     "peers": {"torch_grouped_mm": 0.4, "triton": 0.5}, "ratio_to_best_peer": 0.5,
     "peers_graph": {"torch_grouped_mm": False, "triton": True}, "device": "D", "date": "X",
     "commit": "c", "ms_stream": 0.3, "peers_eager": {"torch_grouped_mm": 0.4, "triton": 0.6},
     "ratio_to_best_peer_eager": 0.75},
    {"shape": "s", "tokens": 4096, "ms": 3.0, "floor_ms": 1.0, "tflops": 400.0, "graph": False,
     "peers": {"triton": 2.0}, "ratio_to_best_peer": 1.5, "peers_graph": {"triton": False}},
]
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "grid.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))
    subprocess.run([sys.executable, script, path, "--no-plot"], check=True,
                   stdout=subprocess.DEVNULL)
    md = open(os.path.join(d, "grid.md")).read()
rows = [l for l in md.splitlines() if l.startswith("| s |")]
assert len(rows) == 2, md
assert "| 0.2000 | 0.4000 | 0.5000 | - | 0.1000 | 2.00 | 0.5000 | 1.0 | yes | triton | 0.7500 |" in rows[0], rows[0]
assert "| 3.0000 | - | 2.0000 | - | 1.0000 | 3.00 | 1.5000 | 400.0 | no | none (eager) | - |" in rows[1], rows[1]
assert "# trtllm_style bf16 on D, X, commit c" in md, md
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
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "grid.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in fp8))
    subprocess.run([sys.executable, script, path, "--no-plot"], check=True,
                   stdout=subprocess.DEVNULL)
    md = open(os.path.join(d, "grid.md")).read()
assert "# deepgemm_style fp8_block on D, X, commit c" in md, md
assert ("| shape | T | ours ms | torch_scaled_grouped_mm | triton | floor ms | x floor | x best peer "
        "| bf16 backend ms | x bf16 backend | TFLOP/s | ours graph | peers graph | x best peer, all "
        "eager |") in md, md
rows = [l for l in md.splitlines() if l.startswith("| s |")]
assert len(rows) == 2, md
assert rows[0] == ("| s | 1 | 0.2000 | 0.4000 | 0.2500 | 0.1000 | 2.00 | 0.8000 | 0.4000 | 0.5000 "
                   "| 1.0 | yes | torch_scaled_grouped_mm, triton | - |"), rows[0]
assert rows[1] == ("| s | 4096 | 3.0000 | - | 2.0000 | 1.0000 | 3.00 | 1.5000 | 4.0000 | 0.7500 | "
                   "400.0 | no | none (eager) | - |"), rows[1]
assert "differed from this format's (s T=4096)" in md, md
print("ok")
