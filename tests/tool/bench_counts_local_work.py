#!/usr/bin/env python3
"""bench_counts_local_work.py MOE CONFIG: runs `moe bench` on CONFIG (tests/tool/configs/
ep_half_sinks.yaml: rank 1 of 2, round robin, two sink experts) on the reference and checks its
records against the routings it dumped, one per input set it timed: active_experts is the mean
over the sets of the routed experts this rank holds, the flops (tflops x ms) and the floor count
only this rank's routed (token, expert) pairs and every token's sinks, and the record names the
sinks so the peers can run them. No third-party module: the dumps are read by hand."""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

HBM_READ, BF16_PEAK = 4.6e12, 754e12  # cmd_bench.cpp's ceilings


def read_safetensors(path):
    """{name: (shape, flat values)} of the I32 and F32 tensors of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        code = {"I32": "i", "F32": "f"}[t["dtype"]]
        values = struct.unpack(f"<{(hi - lo) // 4}{code}", data[8 + n + lo:8 + n + hi])
        out[name] = (t["shape"], values)
    return out


def problem(config):
    text = open(config).read()
    body = re.search(r"problem:\s*\{(.*?)\}", text, re.S).group(1)
    kv = dict(re.match(r"\s*(\w+):\s*(\S+)\s*$", f).groups() for f in body.split(","))
    return {k: int(v) if v.isdigit() else v for k, v in kv.items()}


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def main():
    moe, config = sys.argv[1:3]
    p = problem(config)
    E, k, H, I = p["experts"], p["top_k"], p["hidden"], p["intermediate"]
    S, Is, ranks, rank = p["sink_experts"], p["sink_intermediate"], p["ep_size"], p["ep_rank"]
    assert p["ep_placement"] == "round_robin" and ranks > 1 and S > 0 and Is != I, p
    routed_macs, sink_macs = 3 * I * H, S * 3 * Is * H  # silu_mul: [2I, H] and [H, I]
    routed_bytes, sink_bytes = 2 * routed_macs, 2 * sink_macs  # bf16
    with tempfile.TemporaryDirectory() as d:
        jsonl = os.path.join(d, "r.jsonl")
        res = subprocess.run([moe, "bench", "--config", config, "--tokens", "1,5,64",
                              "--iterations", "8", "--warmup", "0", "--shape", "s", "--jsonl",
                              jsonl, "--dump-routing", d], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr
        records = [json.loads(line) for line in open(jsonl)]
        assert [r["tokens"] for r in records] == [1, 5, 64], records
        dumps = set(f for f in os.listdir(d) if f.endswith(".safetensors"))
        assert dumps == {f"s_{r['tokens']}_{s}.safetensors" for r in records
                         for s in range(r["input_sets"])}, sorted(dumps)
        for r in records:
            T, sets = r["tokens"], r["input_sets"]
            # Every set is timed (no more sets than iterations), at least two of them.
            assert 2 <= sets <= 8 and r["sink_experts"] == S and r["sink_intermediate"] == Is, r
            touched, slots, routings = 0, 0, set()
            for s in range(sets):
                t = read_safetensors(os.path.join(d, f"s_{T}_{s}.safetensors"))
                shape, ids = t["topk_ids"]
                assert shape == [T, k + S] and t["topk_weights"][0] == shape, (shape, t)
                routed = [ids[i] for i in range(len(ids)) if i % (k + S) < k]
                assert [ids[i] for i in range(len(ids)) if i % (k + S) >= k] == \
                    [E + c for _ in range(T) for c in range(S)], ids  # sink columns
                local = [e for e in routed if e % ranks == rank]
                touched += len(set(local))
                slots += len(local)
                routings.add(ids)
            assert len(routings) > 1 or T == 1, T  # the sets differ: each is dumped
            # Means over the sets, counting this rank's experts only (ids are global).
            assert close(r["active_experts"], touched / sets), (r["active_experts"], touched, sets)
            flops = 2 * (slots / sets * routed_macs + T * sink_macs)
            assert close(r["tflops"] * r["ms"] * 1e9, flops), (r, flops)
            read_s = (touched / sets * routed_bytes + sink_bytes) / HBM_READ
            assert close(r["weight_tbps"] * r["ms"] * 1e9, read_s * HBM_READ), r
            assert close(r["floor_ms"], max(read_s, flops / BF16_PEAK) * 1e3), r
            # Far below what counting every expert and slot gives at 64 tokens.
            if T == 64:
                assert r["active_experts"] <= E // ranks and slots / sets < T * k * 0.75, r
    print("ok")


if __name__ == "__main__":
    main()
