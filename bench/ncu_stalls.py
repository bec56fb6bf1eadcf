#!/usr/bin/env python3
"""Summarises Nsight Compute's per-instruction source page: where a kernel's warps stall.

    ncu --clock-control none -k regex:grouped_gemm -s 4 -c 2 --section WarpStateStats \\
        --section SourceCounters --import-source no -o prof <program>
    ncu -i prof.ncu-rep --page source --csv --print-source sass > src.csv   # (gzip is fine)
    python3 bench/ncu_stalls.py src.csv [--kernel 0] [--top 30] \\
        [--regions ce400=mainloop,d08e0=epilogue,e6000=exit] [--mix ce400:d0800]

Per kernel it prints the stall reasons over all sampled warps, the instructions holding the most
samples (each with its top reasons), and with --regions the samples per code region (a region
starts at the low 20 bits of its first instruction's address and runs to the next one; earlier
code is 'start'), so the main loop, the epilogue and idle warps read apart. --mix prints the
opcode mix of an address range (the instructions one main-loop iteration executes). Session 17
found the weight-only GEMM's epilogue this way (bench/NOTES.md).
"""
import argparse
import collections
import csv
import gzip
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def read_kernels(path):
    """[(kernel name, [row dict per SASS instruction])] from a --page source --csv dump."""
    opener = gzip.open if path.endswith(".gz") else open
    kernels, header = [], None
    with opener(path, "rt", newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                kernels.append((row[1] if len(row) > 1 else "?", []))
            elif row[0] == "Address":
                header = row
            elif header is not None and kernels:
                kernels[-1][1].append(dict(zip(header, row)))
    return kernels


def _int(v):
    try:
        return int(str(v).replace(",", ""))
    except ValueError:
        return 0


def stall_columns(rows):
    """The per-reason sample columns (all samples, not the not-issued ones)."""
    keys = rows[0].keys() if rows else []
    return [k for k in keys if k.startswith("stall_") and "Not Issued" not in k]


def address(row):
    return int(row["Address"], 16) & 0xFFFFF


def opcode(row):
    words = row["Source"].split()
    if words and words[0].startswith("@"):  # predicate
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def reasons(rows, stalls):
    c = collections.Counter()
    for r in rows:
        for s in stalls:
            c[s[len("stall_"):]] += _int(r.get(s))
    return c


def pct(part, whole):
    return 100.0 * part / whole if whole else 0.0


def summarize(name, rows, top, regions, mix):
    stalls = stall_columns(rows)
    total = sum(_int(r.get(SAMPLES)) for r in rows)
    out = [f"kernel {name[:100]}: {len(rows)} instructions, {total} samples"]
    by = reasons(rows, stalls)
    out.append("  reasons: " + ", ".join(f"{k} {pct(v, total):.1f}%" for k, v in by.most_common(8)))
    if regions:
        starts = sorted(regions)
        groups = collections.OrderedDict((n, []) for n in ["start"] + [regions[a] for a in starts])
        for r in rows:
            label = "start"
            for a in starts:
                if address(r) >= a:
                    label = regions[a]
            groups[label].append(r)
        for label, rs in groups.items():
            n = sum(_int(r.get(SAMPLES)) for r in rs)
            ex = sum(_int(r.get("Instructions Executed")) for r in rs)
            top_reasons = [(k, v) for k, v in reasons(rs, stalls).most_common(5) if v]
            out.append(f"  region {label:12s} {pct(n, total):5.1f}% of samples, {len(rs)} "
                       f"instructions, {ex} executed: " +
                       ", ".join(f"{k} {pct(v, n):.0f}%" for k, v in top_reasons))
    ranked = sorted(rows, key=lambda r: -_int(r.get(SAMPLES)))[:top]
    for r in ranked:
        n = _int(r.get(SAMPLES))
        if n == 0:
            break
        why = sorted(((_int(r.get(s)), s[len("stall_"):]) for s in stalls), reverse=True)[:3]
        executed = _int(r.get("Instructions Executed"))
        out.append(f"  {address(r):05x} {pct(n, total):5.1f}% ex={executed:>10} "
                   f"{r['Source'].strip()[:60]:60s} " +
                   " ".join(f"{w}={v}" for v, w in why if v))
    if mix:
        lo, hi = mix
        ops = collections.Counter(opcode(r) for r in rows if lo <= address(r) < hi)
        out.append(f"  opcodes in [{lo:05x}, {hi:05x}): {sum(ops.values())}: " +
                   ", ".join(f"{k} {v}" for k, v in ops.most_common()))
    return "\n".join(out)


def parse_regions(text):
    regions = {}
    for item in filter(None, (text or "").split(",")):
        addr, _, label = item.partition("=")
        if not label:
            raise SystemExit(f"--regions: '{item}' is not ADDRESS=LABEL")
        regions[int(addr, 16) & 0xFFFFF] = label
    return regions


def parse_mix(text):
    if not text:
        return None
    lo, _, hi = text.partition(":")
    if not hi:
        raise SystemExit(f"--mix: '{text}' is not LOW:HIGH (hex addresses)")
    return int(lo, 16) & 0xFFFFF, int(hi, 16) & 0xFFFFF


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu --page source --csv --print-source sass output (.gz fine)")
    ap.add_argument("--kernel", type=int, default=None, help="only this kernel (0-based)")
    ap.add_argument("--top", type=int, default=25, help="instructions listed per kernel")
    ap.add_argument("--regions", default=None, help="ADDRESS=LABEL,... (hex, low 20 bits)")
    ap.add_argument("--mix", default=None, help="LOW:HIGH hex address range for the opcode mix")
    args = ap.parse_args(argv)
    kernels = read_kernels(args.csv)
    if not kernels:
        raise SystemExit(f"{args.csv}: no 'Kernel Name' rows (not a --page source --csv dump?)")
    chosen = range(len(kernels)) if args.kernel is None else [args.kernel]
    for i in chosen:
        if not 0 <= i < len(kernels):
            raise SystemExit(f"--kernel {i}: the dump holds {len(kernels)} kernel(s)")
        name, rows = kernels[i]
        print(summarize(name, rows, args.top, parse_regions(args.regions), parse_mix(args.mix)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
