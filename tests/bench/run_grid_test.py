"""bench/run_grid.py without a GPU: which shapes, configs and files each --format uses, the record
checks (points, commit, backend), the bf16-backend merge of fp8 grids, and a whole run of main()
against a fake `moe` (a script writing records and routing dumps) with torch and the peers faked."""
import json
import os
import stat
import sys
import tempfile
import types

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(root, "bench"))
sys.modules.pop("torch", None)
import run_grid  # noqa: E402  (must import without torch: it is absent on CPU machines)

assert "torch" not in sys.modules, "run_grid imports torch at module level"
os.chdir(root)  # configs/bench/... are relative to the repository root, as on the GPU machine


def exits(fn, *args):
    """The message fn(*args) exits with (sys.exit(str)), or fails."""
    try:
        fn(*args)
    except SystemExit as e:
        return str(e.code)
    raise AssertionError(f"{fn.__name__}{args} did not exit")


# --- arguments, shapes and configs per format ---
a = run_grid.parse_args(["--out", "o"])
assert a.format == "bf16" and a.shapes is None and a.tokens == "1,8,64,512,4096,16384", a
assert run_grid.shapes_for("bf16", None) == [
    "qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v3", "inkling_like"]
assert run_grid.shapes_for("fp8_block", None) == ["qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v3"]
assert run_grid.shapes_for("fp8_block", "deepseek_v3") == ["deepseek_v3"]
msg = exits(run_grid.shapes_for, "fp8_block", "qwen3_30b_a3b,inkling_like")
assert "inkling_like has sink experts, which deepgemm_style refuses" in msg, msg
msg = exits(run_grid.shapes_for, "fp8_block", "nope")
assert "no configs/bench/nope_fp8_block.yaml" in msg, msg
assert run_grid.config_path("mixtral_8x7b", "fp8_block") == "configs/bench/mixtral_8x7b_fp8_block.yaml"
assert run_grid.FORMATS["fp8_block"].peers == ("torch_scaled_grouped_mm", "triton")
assert run_grid.FORMATS["bf16"].peers == ("torch_grouped_mm", "triton", "cublas")
assert run_grid.grid_stem("o", "D", "bf16") == os.path.join("o", "D_trtllm_style_bf16_grid")
assert run_grid.grid_stem("o", "D", "fp8_block") == os.path.join(
    "o", "D_deepgemm_style_fp8_block_grid")
# bf16 keeps today's files and command line.
assert run_grid.paths("o", "bf16") == {"jsonl": os.path.join("o", "ours.jsonl"),
                                       "routing": os.path.join("o", "routing")}
assert run_grid.bench_cmd(a, "c.yaml", "s", "D", "j", "r", "64") == [
    "build/bin/moe", "bench", "--config", "c.yaml", "--tokens", "1,8,64,512,4096,16384", "--jsonl",
    "j", "--device", "D", "--commit", "unknown", "--shape", "s", "--dump-routing", "r",
    "--check-max-tokens", "64"]
a.check_max_tokens = "deepseek_v3=8,default=32"
assert run_grid.check_max(a, "deepseek_v3") == "8" and run_grid.check_max(a, "x") == "32"


# --- record checks and merging ---
def rec(shape, t, ms, backend="deepgemm_style", fmt="fp8_block", commit="c", **kw):
    return dict(shape=shape, tokens=t, ms=ms, backend=backend, format=fmt, commit=commit, **kw)


good = [rec("s", 1, 0.5), rec("s", 8, 1.0)]
run_grid.check_records(good, ["s"], "1,8", "c", "deepgemm_style", "fp8_block")
assert "expected" in exits(run_grid.check_records, good[:1], ["s"], "1,8", "c",
                           "deepgemm_style", "fp8_block")
assert "expected" in exits(run_grid.check_records, good + good[:1], ["s"], "1,8", "c",
                           "deepgemm_style", "fp8_block")  # a row of an earlier run
assert "of c" in exits(run_grid.check_records, [good[0], rec("s", 8, 1.0, commit="old")], ["s"],
                       "1,8", "c", "deepgemm_style", "fp8_block")
fell_back = [good[0], rec("s", 8, 1.0, backend="reference")]  # the config's fallback
assert "reference" in exits(run_grid.check_records, fell_back, ["s"], "1,8", "c",
                            "deepgemm_style", "fp8_block")

bf16 = [rec("s", 8, 4.0, "trtllm_style", "bf16"), rec("s", 1, 1.0, "trtllm_style", "bf16")]
run_grid.add_bf16_backend(good, bf16, lambda s, t: t == 1)
assert good[0]["bf16_backend_ms"] == 1.0 and good[0]["ratio_to_bf16_backend"] == 0.5, good[0]
assert good[1]["bf16_backend_ms"] == 4.0 and good[1]["ratio_to_bf16_backend"] == 0.25, good[1]
assert good[0]["bf16_backend_same_routing"] and not good[1]["bf16_backend_same_routing"]

r = rec("s", 1, 0.5, peers={"torch_scaled_grouped_mm": 1.0, "triton": 0.25, "error": "x"},
        ms_stream=0.6, peers_eager={"torch_scaled_grouped_mm": 1.2})
run_grid.add_peer_ratios(r)
assert r["ratio_to_best_peer"] == 2.0 and r["ratio_to_best_peer_eager"] == 0.5, r
r = rec("s", 1, 0.5, peers={"error": "both failed"})
run_grid.add_peer_ratios(r)
assert r["ratio_to_best_peer"] is None and "ratio_to_best_peer_eager" not in r, r

# --- a whole run against a fake moe: fp8_block, then bf16 ---
FAKE_MOE = r'''
import json, os, sys
a = dict(zip(sys.argv[2::2], sys.argv[3::2]))
with open(os.environ["FAKE_MOE_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
fmt = "fp8_block" if a["--config"].endswith("_fp8_block.yaml") else "bf16"
if os.environ.get("FAKE_MOE_FAIL") == fmt:
    sys.exit(3)
for t in a["--tokens"].split(","):
    t = int(t)
    r = {"date": "D", "device": a["--device"], "commit": a["--commit"],
         "backend": {"fp8_block": "deepgemm_style", "bf16": "trtllm_style"}[fmt], "format": fmt,
         "shape": a["--shape"], "experts": 8, "top_k": 2, "hidden": 128, "intermediate": 128,
         "tokens": t, "ms": (1.0 if fmt == "fp8_block" else 2.0) * t, "tflops": 1.0,
         "weight_tbps": 1.0, "floor_ms": 0.5 * t, "graph": t <= 64,
         "ms_stream": 1.5 * t if t <= 64 else None, "peers": {}}
    with open(a["--jsonl"], "a") as f:
        f.write(json.dumps(r) + "\n")
    differ = fmt == "bf16" and os.environ.get("FAKE_MOE_DIFFER") == f"{a['--shape']}_{t}"
    with open(os.path.join(a["--dump-routing"], f"{a['--shape']}_{t}.safetensors"), "w") as f:
        f.write("other" if differ else f"routing {a['--shape']} {t}")
'''


class FakeCuda:
    @staticmethod
    def get_device_name(i):
        return "FakeGPU"


sys.modules["torch"] = types.SimpleNamespace(cuda=FakeCuda)
peer_calls = []


def fake_peers(fmt):
    def run(rec, routing, peers_dir):
        peer_calls.append((fmt, rec["shape"], rec["tokens"], open(routing).read(), peers_dir))
        if rec["tokens"] == 8:
            raise RuntimeError("peer cannot run this point")
        names = run_grid.FORMATS[fmt].peers
        return ({n: 0.5 * rec["tokens"] for n in names}, {n: True for n in names},
                {n: 0.75 * rec["tokens"] for n in names} if rec["graph"] else {})
    return run


run_grid.PEER_RUNNERS = {f: fake_peers(f) for f in run_grid.FORMATS}
date = run_grid.time.strftime("%Y-%m-%d")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


with tempfile.TemporaryDirectory() as d:
    moe = os.path.join(d, "moe")
    with open(moe, "w") as f:
        f.write(f"#!{sys.executable}\n{FAKE_MOE}")
    os.chmod(moe, os.stat(moe).st_mode | stat.S_IEXEC)
    log = os.environ["FAKE_MOE_LOG"] = os.path.join(d, "moe.log")
    out = os.path.join(d, "out")
    os.makedirs(os.path.join(out, "routing_fp8_block"))
    # Stale rows and dumps of an earlier run are removed, never paired with this run's.
    with open(os.path.join(out, "ours_fp8_block.jsonl"), "w") as f:
        f.write(json.dumps(rec("qwen3_30b_a3b", 1, 9.0, commit="abc")) + "\n")
    with open(os.path.join(out, "routing_fp8_block", "qwen3_30b_a3b_1.safetensors"), "w") as f:
        f.write("stale")
    os.environ["FAKE_MOE_DIFFER"] = "deepseek_v3_64"
    argv = ["--moe", moe, "--peers", "P", "--out", out, "--format", "fp8_block", "--shapes",
            "qwen3_30b_a3b,deepseek_v3", "--tokens", "1,8,64,512", "--commit", "abc",
            "--check-max-tokens", "deepseek_v3=8,default=64"]
    run_grid.main(argv)
    calls = read_jsonl(log)
    assert [c[2] for c in calls] == [
        "configs/bench/qwen3_30b_a3b_fp8_block.yaml", "configs/bench/qwen3_30b_a3b_bf16.yaml",
        "configs/bench/deepseek_v3_fp8_block.yaml", "configs/bench/deepseek_v3_bf16.yaml"], calls
    for c in calls:
        kw = dict(zip(c[1::2], c[2::2]))
        fp8 = kw["--config"].endswith("_fp8_block.yaml")
        assert kw["--tokens"] == "1,8,64,512" and kw["--commit"] == "abc", c
        assert kw["--shape"] in kw["--config"] and kw["--device"] == "FakeGPU", c
        # Only the fp8 run dumps into the dir the peers read; the bf16 run is timing only.
        assert kw["--dump-routing"] == os.path.join(
            out, "routing_fp8_block" if fp8 else "routing_fp8_block_bf16_backend"), c
        assert kw["--jsonl"] == os.path.join(
            out, "ours_fp8_block.jsonl" if fp8 else "bf16_backend_fp8_block.jsonl"), c
        assert kw["--check-max-tokens"] == (
            ("8" if "deepseek" in kw["--shape"] else "64") if fp8 else "0"), c
    assert all(p[0] == "fp8_block" and p[3] == f"routing {p[1]} {p[2]}" and p[4] == "P"
               for p in peer_calls), peer_calls
    stem = os.path.join(out, f"{date}_deepgemm_style_fp8_block_grid")
    recs = read_jsonl(stem + ".jsonl")
    assert [(r["shape"], r["tokens"]) for r in recs] == [
        (s, t) for s in ("qwen3_30b_a3b", "deepseek_v3") for t in (1, 8, 64, 512)], recs
    r1, r8 = recs[0], recs[1]
    assert r1["ms"] == 1.0 and r1["bf16_backend_ms"] == 2.0 and r1["ratio_to_bf16_backend"] == 0.5
    assert r1["peers"] == {"torch_scaled_grouped_mm": 0.5, "triton": 0.5}, r1
    assert r1["ratio_to_best_peer"] == 2.0 and r1["ratio_to_best_peer_eager"] == 2.0, r1
    assert r8["peers"] == {"error": "peer cannot run this point"} and r8["bf16_backend_ms"] == 16.0
    assert r8["ratio_to_best_peer"] is None, r8
    assert [r["bf16_backend_same_routing"] for r in recs] == [True] * 6 + [False, True], recs
    md = open(stem + ".md").read()
    assert md.startswith("# deepgemm_style fp8_block on FakeGPU"), md
    assert "| torch_scaled_grouped_mm | triton | floor ms |" in md, md
    assert "| qwen3_30b_a3b | 1 | 1.0000 | 0.5000 | 0.5000 | 0.5000 | 2.00 | 2.0000 | 2.0000 | " \
           "0.5000 | 1.0 | yes | torch_scaled_grouped_mm, triton | 2.0000 |" in md, md
    assert "At 1 point(s) the bf16 backend's routing differed from this format's (deepseek_v3 " \
           "T=64)" in md, md

    # bf16: today's configs, files and stem; no bf16-backend run or fields.
    open(log, "w").close()
    peer_calls.clear()
    run_grid.main(["--moe", moe, "--out", out, "--shapes", "mixtral_8x7b", "--tokens", "1,4096",
                   "--commit", "abc"])
    calls = read_jsonl(log)
    assert len(calls) == 1 and calls[0][2] == "configs/bench/mixtral_8x7b_bf16.yaml", calls
    assert calls[0][calls[0].index("--jsonl") + 1] == os.path.join(out, "ours.jsonl"), calls
    assert calls[0][calls[0].index("--dump-routing") + 1] == os.path.join(out, "routing"), calls
    recs = read_jsonl(os.path.join(out, f"{date}_trtllm_style_bf16_grid.jsonl"))
    assert [r["tokens"] for r in recs] == [1, 4096] and recs[0]["peers"]["cublas"] == 0.5, recs
    assert not any(k.startswith("bf16_backend") for r in recs for k in r), recs
    assert list(recs[0])[-5:] == ["peers", "peers_graph", "peers_eager", "ratio_to_best_peer",
                                  "ratio_to_best_peer_eager"], list(recs[0])
    md = open(os.path.join(out, f"{date}_trtllm_style_bf16_grid.md")).read()
    assert md.startswith("# trtllm_style bf16 on FakeGPU") and "bf16 backend" not in md, md

    # A failed moe bench, of ours or of the bf16 backend, writes no grid.
    os.environ["FAKE_MOE_FAIL"] = "bf16"
    os.remove(stem + ".jsonl")
    msg = exits(run_grid.main, argv)
    assert "moe bench failed for qwen3_30b_a3b (trtllm_style bf16) (exit 3)" in msg, msg
    assert not os.path.exists(stem + ".jsonl")
    os.environ["FAKE_MOE_FAIL"] = "fp8_block"
    assert "moe bench failed for qwen3_30b_a3b (exit 3)" in exits(run_grid.main, argv)
    del os.environ["FAKE_MOE_FAIL"]
    # An inkling request fails before anything runs.
    open(log, "w").close()
    msg = exits(run_grid.main, argv[:-6] + ["--shapes", "inkling_like"])
    assert "sink experts" in msg and open(log).read() == "", msg
print("ok")
