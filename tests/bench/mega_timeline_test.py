"""bench/mega_timeline.py reads a cutlass_mega timeline (the JSON src/timeline.cpp writes): the
boundaries across CTAs, each phase's items, their time since the stamp before them and their
rate, and each phase's rate over its span; a file that is not a timeline is refused by name."""
import json
import os
import tempfile

from bench_script import run_script

PHASES = ["entry", "scheduled", "gemm1_start", "gemm1_done", "gemm2_start", "gemm2_done",
          "combine_start", "exit"]


def record(cta, bounds, items, split2=1):
    return {"cta": cta, "split2": split2,
            "boundaries": [{"ns": b, "clock": 0} for b in bounds],
            "items": [{"phase": p, "u": u, "ns": ns, "clock": 0} for p, u, ns in items]}


# Two CTAs; GEMM1 items of 32 steps x 16384 bytes (512 KiB); GEMM2's 12 steps in 5 K parts, as
# the kernel cuts them: item u is part u % 5, steps [2.4 part, 2.4 (part + 1)) floored (2 or 3).
timeline = {
    "ctas": 2, "items": 8, "format": "bf16", "tokens": 1, "steps1": 32, "steps2": 12,
    "step_bytes": 16384, "instance": 9, "phases": PHASES,
    "records": [
        record(0, [0, 2000, 2000, 22000, 24000, 26000, 27000, 28000],
               [(1, 0, 12000), (1, 2, 22000), (2, 7, 26000)], split2=5),
        record(1, [500, 2500, 2500, 12500, 24000, None, None, None],
               [(1, 1, 12500)], split2=5),
    ],
}

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "t.json")
    with open(path, "w") as f:
        json.dump(timeline, f)
    out = run_script("mega_timeline.py", path)
    assert "bf16, 1 tokens, 2 CTAs, GEMM2 in 5 K part(s), instance 9" in out, out
    # entry: min 0, median 0.25, max 0.5 us; gemm2_done reached by one CTA only.
    assert "entry" in out and "    0.00      0.25      0.50     2" in out, out
    assert [l for l in out.splitlines() if l.startswith("gemm2_done")][0].split()[-1] == "1", out
    # GEMM1: 3 items of 10 us each (12000-2000, 22000-12000, 12500-2500): 524288 B / 10 us =
    # 52.4 GB/s an SM; span 2000 -> 22000 ns: 3 x 524288 B / 20 us = 0.08 TB/s.
    g1 = [l for l in out.splitlines() if l.startswith("GEMM1")][0].split()
    assert g1[1:4] == ["3", "2", "10.00"], g1
    assert g1[5] == "52.4" and g1[6] == "20.00" and g1[7] == "0.08", g1
    # GEMM2: one item of 2 us (26000 - 24000), part 7 % 5 = 2: steps 4..7, 3 x 16384 B = 24.6 GB/s.
    g2 = [l for l in out.splitlines() if l.startswith("GEMM2")][0].split()
    assert g2[1:4] == ["1", "1", "2.00"] and g2[5] == "24.6", g2

    other = os.path.join(d, "other.json")
    with open(other, "w") as f:
        json.dump({"ctas": 1}, f)
    out = run_script("mega_timeline.py", other, ok=False)
    assert "is not a cutlass_mega timeline" in out and "other.json" in out, out
    out = run_script("mega_timeline.py", os.path.join(d, "missing.json"), ok=False)
    assert "cannot read" in out and "missing.json" in out, out
print("ok")
