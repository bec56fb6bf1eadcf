#!/usr/bin/env python3
"""Writes a `moe run --inputs` file (safetensors: hidden_states [T, H] bf16 and, with --experts,
router_logits [T, E] f32) with no third-party module, for the tool's bad-input tests: every value
0.5 (logits 0) but those --nan and --masked-token set.

  write_inputs.py OUT T H [--experts E] [--nan T,C] [--masked-token T] [--f32 [--big T,C,V]]

--f32 stores hidden_states as F32; --big sets hidden_states[T, C] to V (with --f32).
"""
import argparse
import json
import math
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("tokens", type=int)
    ap.add_argument("hidden", type=int)
    ap.add_argument("--experts", type=int, default=0, help="also write router_logits [T, E]")
    ap.add_argument("--nan", help="T,C: hidden_states[T, C] is NaN")
    ap.add_argument("--masked-token", type=int, help="every router logit of this token is -inf")
    ap.add_argument("--f32", action="store_true", help="hidden_states as F32")
    ap.add_argument("--big", help="T,C,V: hidden_states[T, C] is V (with --f32)")
    a = ap.parse_args()
    if a.f32:
        hidden = [0.5] * (a.tokens * a.hidden)
        if a.big:
            t, c, v = a.big.split(",")
            hidden[int(t) * a.hidden + int(c)] = float(v)
        blobs = [("hidden_states", "F32", [a.tokens, a.hidden],
                  struct.pack(f"<{len(hidden)}f", *hidden))]
    else:
        half = 0x3F00  # 0.5 in bf16
        hidden = [half] * (a.tokens * a.hidden)
        if a.nan:
            t, c = (int(v) for v in a.nan.split(","))
            hidden[t * a.hidden + c] = 0x7FC0  # a quiet NaN in bf16
        blobs = [("hidden_states", "BF16", [a.tokens, a.hidden],
                  struct.pack(f"<{len(hidden)}H", *hidden))]
    if a.experts:
        logits = [0.0] * (a.tokens * a.experts)
        if a.masked_token is not None:
            for e in range(a.experts):
                logits[a.masked_token * a.experts + e] = -math.inf
        blobs.append(("router_logits", "F32", [a.tokens, a.experts],
                      struct.pack(f"<{len(logits)}f", *logits)))
    header, offset = {}, 0
    for name, dtype, shape, data in blobs:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(d for *_, d in blobs))


if __name__ == "__main__":
    main()
