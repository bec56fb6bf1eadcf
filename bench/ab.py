#!/usr/bin/env python3
"""A/B of one `moe bench` config in one run: each variant is the config with its own `options:`
(and, if given, its own plugin directory, e.g. a build of an older commit), run in interleaved
rounds (A B C, A B C, ...) so drift hits every variant alike. Writes <out>/ab.jsonl (every record,
with `variant`, `options`, `round`), <out>/ab.md (the best time of each variant per token count and
its ratio to the first variant; with two rounds or more, each variant's spread over its rounds, the
noise those ratios must clear) and prints the table.

    python3 bench/ab.py --moe build/bin/moe --out $OUT/tiles \
        --config configs/bench/trtllm/mixtral_8x7b_mxfp8.yaml --tokens 256,512 --rounds 2 \
        --variant 128='token_tile: 128' --variant 96='token_tile: 96'
    python3 bench/ab.py --moe build/bin/moe --out $OUT/old --tokens 1,8 \
        --config configs/bench/qwen3_30b_a3b_bf16.yaml \
        --variant now= --variant old= --plugins old=build/alt_old
    python3 bench/ab.py --moe build/bin/moe --out $OUT/static --tokens 64,4096 \
        --config configs/bench/mixtral_8x7b_fp8_tensor.yaml --variant dynamic= \
        --variant static= --config-of static=configs/bench/mixtral_8x7b_fp8_tensor_static.yaml
    python3 bench/ab.py --moe build/bin/moe --out $OUT/pdl --tokens 1,8,64 \
        --config configs/bench/qwen3_30b_a3b_fp8_block.yaml --variant pdl= --variant plain= \
        --env plain=MOE_PDL=0

Configs run with --strict (the config's fallback may not stand in for the backend it names) and
--check-max-tokens 0 (timing only: the conformance suite checks results). A variant whose run
fails is reported with the error's last line and the others go on; the exit status is then 1.
"""
import argparse
import json
import os
import re
import subprocess
import sys

NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moe", default="build/bin/moe")
    ap.add_argument("--config", required=True, help="a `moe bench` config (YAML)")
    ap.add_argument("--variant", action="append", required=True, metavar="NAME=OPTIONS",
                    help="a variant: its name and its options as the body of a YAML flow "
                         "mapping ('token_tile: 96, bf16_gemm: own'; empty: the config as it is); "
                         "the first is the baseline of the ratios")
    ap.add_argument("--plugins", action="append", default=[], metavar="NAME=DIR",
                    help="run variant NAME with MOE_PLUGIN_PATH=DIR")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VAR=VALUE",
                    help="run variant NAME with the environment variable VAR set to VALUE "
                         "(repeatable; e.g. MOE_PDL=0: no dependent launches)")
    ap.add_argument("--config-of", action="append", default=[], metavar="NAME=CONFIG",
                    help="run variant NAME on CONFIG instead of --config (another problem or "
                         "format of the same layer, e.g. static against dynamic scales)")
    ap.add_argument("--tokens", required=True, help="comma-separated token counts")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds one `moe bench` of a variant may run; past it the run is killed "
                         "and the variant reported as hung (a measurement switch that deadlocks "
                         "must not take the device call with it)")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--graph", choices=["auto", "on", "off"], default="auto",
                    help="`moe bench --graph`: off times stream launches (a switch that acts on "
                         "stream launches only, as MOE_MEGA_GEMM2=early)")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    a.variants = []
    for v in a.variant:
        name, eq, options = v.partition("=")
        if not eq or not NAME.match(name):
            ap.error(f"--variant '{v}': expected NAME=OPTIONS, NAME of letters, digits and _.+-")
        if name in [n for n, _ in a.variants]:
            ap.error(f"--variant '{name}' is given twice")
        a.variants.append((name, options.strip()))
    names = [n for n, _ in a.variants]
    a.plugin_dirs = {}
    for p in a.plugins:
        name, eq, path = p.partition("=")
        if not eq or name not in names:
            ap.error(f"--plugins '{p}': expected NAME=DIR for one of the variants {names}")
        a.plugin_dirs[name] = os.path.abspath(path)
    a.envs = {}
    for e in a.env:
        name, eq, assignment = e.partition("=")
        var, eq2, value = assignment.partition("=")
        if not eq or not eq2 or name not in names or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
            ap.error(f"--env '{e}': expected NAME=VAR=VALUE for one of the variants {names}")
        a.envs.setdefault(name, {})[var] = value
    a.configs = {}
    for c in a.config_of:
        name, eq, path = c.partition("=")
        if not eq or name not in names or not path:
            ap.error(f"--config-of '{c}': expected NAME=CONFIG for one of the variants {names}")
        if name in a.configs:
            ap.error(f"--config-of '{name}' is given twice")
        a.configs[name] = path
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    if not re.fullmatch(r"\d+(,\d+)*", a.tokens):
        ap.error(f"--tokens '{a.tokens}': expected comma-separated token counts")
    return a


def variant_config(text, options, path):
    """The config's text with `options: {...}` appended (none when `options` is empty)."""
    if options and re.search(r"^options\s*:", text, re.M):
        sys.exit(f"ab: {path} has options of its own; a variant's options would not merge with "
                 "them: remove them from the config and give them in each --variant")
    return text if not options else text.rstrip("\n") + "\noptions: {" + options + "}\n"


def run_variant(a, name, options, config_path, rnd):
    """One `moe bench` of a variant; its records (tagged) or an error line."""
    jsonl = os.path.join(a.out, f"{name}.round{rnd}.jsonl")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    cmd = [a.moe, "bench", "--config", config_path, "--tokens", a.tokens, "--iterations",
           str(a.iterations), "--check-max-tokens", "0", "--strict", "--jsonl", jsonl,
           "--commit", a.commit, "--graph", a.graph]
    env = dict(os.environ)
    if name in a.plugin_dirs:
        env["MOE_PLUGIN_PATH"] = a.plugin_dirs[name]
    env.update(a.envs.get(name, {}))
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return [], f"timed out after {a.timeout:g} s (killed: a hang?)"
    if res.returncode != 0:
        lines = (res.stderr or res.stdout).strip().splitlines()
        return [], f"exit {res.returncode}: {lines[-1] if lines else '(no output)'}"
    records = []
    with open(jsonl) as f:
        for line in f:
            r = json.loads(line)
            r.update(variant=name, options=options, round=rnd)
            records.append(r)
    return records, None


def spread_rows(names, records, tokens):
    """Markdown rows: per token count and variant, its slowest round's ms over its fastest's (with
    two rounds or more): how far apart the same code lands run to run, so a ratio between
    variants closer to 1 than these says nothing."""
    runs = {}
    for r in records:
        runs.setdefault((r["tokens"], r["variant"]), []).append(r["ms"])
    if not runs or max(len(v) for v in runs.values()) < 2:
        return []

    def cell(t, n):
        v = runs.get((t, n), [])
        return f"{max(v) / min(v):.3f}" if len(v) > 1 and min(v) > 0 else "-"
    rows = ["", "Spread over rounds (slowest / fastest round of each variant; ratios between "
            "variants closer to 1 than this are noise):", "",
            "| T | " + " | ".join(names) + " |", "|" + "---|" * (1 + len(names))]
    return rows + [f"| {t} | " + " | ".join(cell(t, n) for n in names) + " |" for t in tokens]


def table(variants, records, errors, configs=None):
    """Markdown: per token count, each variant's best ms over the rounds and its ratio to the
    first variant's."""
    names = [n for n, _ in variants]
    best, best_rec = {}, {}
    for r in records:
        key = (r["tokens"], r["variant"])
        if r["ms"] < best.get(key, float("inf")):
            best[key], best_rec[key] = r["ms"], r
    tokens = sorted({t for t, _ in best})
    head = "| T | " + " | ".join(f"{n} ms" for n in names) + " | " + " | ".join(
        f"{n} / {names[0]}" for n in names[1:]) + " |"
    rows = [head, "|" + "---|" * (1 + 2 * len(names) - 1)]
    for t in tokens:
        ms = [best.get((t, n)) for n in names]
        cells = [f"{m:.4f}" if m is not None else "-" for m in ms]
        ratios = [f"{m / ms[0]:.3f}" if m is not None and ms[0] else "-" for m in ms[1:]]
        rows.append(f"| {t} | " + " | ".join(cells + ratios) + " |")
    # `moe bench`'s gpu_clock (NVML, device plugins): the clock and power the best rounds ran at.
    clocks = {k: r.get("gpu_clock") for k, r in best_rec.items() if r.get("gpu_clock")}
    if clocks:
        rows += ["", "SM clock MHz / board W while timed (the rounds above):", "",
                 "| T | " + " | ".join(names) + " |", "|" + "---|" * (1 + len(names))]
        for t in tokens:
            cells = [f"{clocks[(t, n)]['sm_mhz_mean']:.0f} / {clocks[(t, n)]['power_w_mean']:.0f}"
                     if (t, n) in clocks else "-" for n in names]
            rows.append(f"| {t} | " + " | ".join(cells) + " |")
    rows += spread_rows(names, records, tokens)
    for name, err in errors:
        rows.append(f"\n{name} failed: {err}")
    legend = "options: " + "; ".join(f"{n}: {{{o}}}" if o else f"{n}: (the config's)"
                                     for n, o in variants)
    if configs:
        legend += "\n\nconfigs: " + "; ".join(f"{n}: {c}" for n, c in configs.items())
    return legend + "\n\n" + "\n".join(rows) + "\n"


def main(argv):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    paths = {}
    for name, options in a.variants:
        source = a.configs.get(name, a.config)
        with open(source) as f:
            text = f.read()
        paths[name] = os.path.join(a.out, f"{name}.yaml")
        with open(paths[name], "w") as f:
            f.write(variant_config(text, options, source))
    records, errors = [], []
    for rnd in range(1, a.rounds + 1):
        for name, options in a.variants:
            if name in [n for n, _ in errors]:
                continue  # failed once: its error stands
            got, err = run_variant(a, name, options, paths[name], rnd)
            records += got
            if err:
                errors.append((name, err))
                print(f"ab: {name} (round {rnd}) failed: {err}", file=sys.stderr)
    with open(os.path.join(a.out, "ab.jsonl"), "w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    timed = {"auto": "replayed CUDA graphs at T <= 64, stream launches above",
             "on": "replayed CUDA graphs", "off": "stream launches (no graphs)"}[a.graph]
    md = (f"# A/B of {a.config}\n\ntimed: {timed} (--graph {a.graph})\n\n" +
          table(a.variants, records, errors, a.configs))
    with open(os.path.join(a.out, "ab.md"), "w") as f:
        f.write(md)
    print(md)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
