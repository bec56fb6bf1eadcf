#!/usr/bin/env python3
"""Summarises a cutlass_mega timeline: when the CTAs reached each phase boundary, how long their
work items took and at what rate each streamed its weights (per SM), and each GEMM phase's rate
over all SMs. The timeline is what a layer writes when MOE_MEGA_TIMELINE names a file at prepare
(the last run's clocks, written when the layer is destroyed; src/timeline.hpp):

    MOE_MEGA_TIMELINE=/tmp/t1.json build/bin/moe bench --config \\
        configs/bench/mega/qwen3_30b_a3b_bf16.yaml --tokens 1 --check-max-tokens 0
    python3 bench/mega_timeline.py /tmp/t1.json

An item's time is the gap since the boundary or item before it on its CTA (its producer streams
ahead, so the first item of a phase also holds the stages prefetched before the barrier). Times
are %globaltimer nanoseconds from the earliest kernel entry.
"""
import argparse
import json
import statistics
import sys

PHASE_START = {1: "gemm1_start", 2: "gemm2_start"}
PHASE_NAME = {1: "GEMM1", 2: "GEMM2"}


def load(path):
    try:
        with open(path) as f:
            t = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"mega_timeline: cannot read {path}: {e}")
    if not isinstance(t, dict) or "records" not in t or "phases" not in t:
        sys.exit(f"mega_timeline: {path} is not a cutlass_mega timeline (no 'records', 'phases')")
    return t


def items_of(t):
    """Per phase: [(cta, u, ns, item us, bytes)]."""
    out = {1: [], 2: []}
    phases = t["phases"]
    for r in t["records"]:
        bounds = {phases[i]: b["ns"] for i, b in enumerate(r["boundaries"])}
        split2 = max(1, r.get("split2", 1))
        last = {}
        for it in r["items"]:
            ph = it["phase"]
            if ph not in out or it["ns"] is None:
                continue
            before = last.get(ph, bounds.get(PHASE_START[ph]))
            last[ph] = it["ns"]
            if before is None:
                continue
            if ph == 1:
                steps = t["steps1"]
            else:  # item u is part u % split2 of its K steps, split as the kernel splits them
                part = it["u"] % split2
                steps = (part + 1) * t["steps2"] // split2 - part * t["steps2"] // split2
            out[ph].append((r["cta"], it["u"], it["ns"], (it["ns"] - before) / 1e3,
                            steps * t["step_bytes"]))
    return out


def summary(t):
    lines = [f"cutlass_mega timeline: {t.get('format', '?')}, {t.get('tokens', '?')} tokens, "
             f"{t['ctas']} CTAs, GEMM2 in {t['records'][0].get('split2', '?')} K part(s), "
             f"instance {t.get('instance', '?')}"]
    lines.append(f"{'boundary':<14} {'min us':>9} {'median us':>9} {'max us':>9} {'CTAs':>5}")
    for i, name in enumerate(t["phases"]):
        ns = [r["boundaries"][i]["ns"] for r in t["records"] if r["boundaries"][i]["ns"] is not None]
        if not ns:
            lines.append(f"{name:<14} {'-':>9} {'-':>9} {'-':>9} {0:>5}")
            continue
        lines.append(f"{name:<14} {min(ns) / 1e3:>9.2f} {statistics.median(ns) / 1e3:>9.2f} "
                     f"{max(ns) / 1e3:>9.2f} {len(ns):>5}")
    lines.append("")
    lines.append(f"{'phase':<6} {'items':>6} {'CTAs':>5} {'item us med':>11} {'max':>8} "
                 f"{'GB/s an SM med':>14} {'span us':>8} {'TB/s':>6}")
    phases = t["phases"]
    for ph, rows in items_of(t).items():
        if not rows:
            continue
        us = [r[3] for r in rows]
        rates = [r[4] / (r[3] * 1e3) for r in rows if r[3] > 0]
        start = [rec["boundaries"][phases.index(PHASE_START[ph])]["ns"] for rec in t["records"]]
        start = [s for s in start if s is not None]
        span_ns = max(r[2] for r in rows) - (min(start) if start else min(r[2] for r in rows))
        total = sum(r[4] for r in rows)
        lines.append(
            f"{PHASE_NAME[ph]:<6} {len(rows):>6} {len({r[0] for r in rows}):>5} "
            f"{statistics.median(us):>11.2f} {max(us):>8.2f} "
            f"{statistics.median(rates) if rates else 0:>14.1f} {span_ns / 1e3:>8.2f} "
            f"{total / span_ns / 1e3 if span_ns > 0 else 0:>6.2f}")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("timeline", help="the JSON a layer wrote where MOE_MEGA_TIMELINE pointed")
    a = ap.parse_args(argv)
    print(summary(load(a.timeline)))


if __name__ == "__main__":
    main(sys.argv[1:])
