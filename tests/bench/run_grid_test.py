"""bench/run_grid.py without a GPU: which shapes, configs, token counts and files each grid
(--format, --backend) uses, the record checks (points, commit, backend), the merge of trtllm_style
bf16 into the fp8_block and cutlass_mega grids, and whole runs of main() against a fake `moe` (a
script writing records and routing dumps as the config's backend) with torch and the peers
faked."""
import contextlib
import glob
import io
import json
import os
import re
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


def usage_error(argv):
    """parse_args(argv)'s usage error (exit 2, the message on stderr), or fails."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert exits(run_grid.parse_args, argv) == "2", argv
    return err.getvalue()


# --- arguments: a grid is a format and a backend, with its own default tokens ---
a = run_grid.parse_args(["--out", "o"])
assert a.format == "bf16" and a.shapes is None and a.tokens == "1,8,64,512,4096,16384", a
assert a.backend == "trtllm_style" and a.grid == run_grid.GRIDS["bf16", "trtllm_style"], a
fp8 = run_grid.parse_args(["--out", "o", "--format", "fp8_block"]).grid
assert fp8 == run_grid.GRIDS["fp8_block", "deepgemm_style"] and fp8.bf16_backend, fp8
bf16 = a.grid
m = run_grid.parse_args(["--out", "o", "--format", "bf16", "--backend", "cutlass_mega"])
mega = m.grid
assert m.backend == "cutlass_mega" and mega.fmt == "bf16" and mega.bf16_backend, m
assert m.tokens == "1,2,4,8,16,32,64,128,512", m  # issue 11's decode grid by default
assert run_grid.parse_args(["--out", "o", "--backend", "cutlass_mega"]).grid == mega
assert run_grid.parse_args(["--out", "o", "--backend", "cutlass_mega", "--tokens", "1,8"]
                           ).tokens == "1,8"
mega8 = run_grid.parse_args(["--out", "o", "--format", "fp8_block", "--backend", "cutlass_mega"])
assert mega8.grid == run_grid.GRIDS["fp8_block", "cutlass_mega"] and mega8.grid.bf16_backend, mega8
assert mega8.tokens == "1,2,4,8,16,32,64,128,512", mega8
assert mega8.grid.rivals == ("deepgemm_style",) and fp8.rivals == () and bf16.rivals == ()
# trtllm_style's fp8_block: its own configs, trtllm_style bf16 beside it, deepgemm_style the rival.
t8b = run_grid.parse_args(["--out", "o", "--format", "fp8_block", "--backend", "trtllm_style"])
assert t8b.grid == run_grid.GRIDS["fp8_block", "trtllm_style"] and t8b.grid.bf16_backend, t8b
assert t8b.grid.rivals == ("deepgemm_style",) and t8b.tokens == run_grid.GRID_TOKENS, t8b
assert run_grid.grid_configs(t8b.grid, "deepseek_v3") == [
    "configs/bench/trtllm/deepseek_v3_fp8_block.yaml", "configs/bench/deepseek_v3_bf16.yaml"]
assert run_grid.grid_tag(t8b.grid) == "trtllm_style_fp8_block"
# Inkling-like too: its bf16 sinks run apart (cuBLAS) next to the e4m3 GEMMs.
assert run_grid.shapes_for(t8b.grid, "inkling_like", t8b.tokens) == ["inkling_like"]
for shape in t8b.grid.shapes:
    with open(run_grid.config_path(shape, "fp8_block", t8b.grid.configs)) as f:
        assert "backend: trtllm_style" in f.read(), shape
# mxfp8: weight-only on trtllm_style, its default backend.
assert run_grid.parse_args(["--out", "o", "--format", "mxfp8"]).grid == \
    run_grid.GRIDS["mxfp8", "trtllm_style"]
for f4 in ("mxfp4", "nvfp4"):  # 4-bit grids: cutlass_mega's by default, trtllm_style bf16 beside
    g4 = run_grid.parse_args(["--out", "o", "--format", f4])
    assert g4.backend == "cutlass_mega" and g4.grid.fmt == f4 and g4.grid.bf16_backend, g4
    # trtllm_style's weight-only 4-bit path is timed beside it on the same configs.
    assert g4.tokens == "1,2,4,8,16,32,64,128,512" and g4.grid.rivals == ("trtllm_style",), g4
    assert run_grid.PEER_RUNNERS[f4] is run_grid.peers_for, f4
    assert run_grid.grid_report.PEERS_BY_FORMAT[f4] == run_grid.grid_report.PEERS_BY_FORMAT["bf16"]
    assert run_grid.grid_stem("o", "D", g4.grid) == os.path.join("o", f"D_cutlass_mega_{f4}_grid")
    # trtllm_style's weight-only 4-bit grid: its own configs at every size, its bf16 beside.
    t4 = run_grid.parse_args(["--out", "o", "--format", f4, "--backend", "trtllm_style"])
    assert t4.grid == run_grid.GRIDS[f4, "trtllm_style"] and t4.grid.bf16_backend, t4
    assert t4.tokens == run_grid.GRID_TOKENS and t4.grid.rivals == (), t4
    assert run_grid.grid_configs(t4.grid, "qwen3_30b_a3b") == [
        f"configs/bench/trtllm/qwen3_30b_a3b_{f4}.yaml", "configs/bench/qwen3_30b_a3b_bf16.yaml"]
    # Inkling-like too: its bf16 sinks run apart (cuBLAS) next to the weight-only GEMMs.
    assert "inkling_like" in t4.grid.shapes and "inkling_like" in g4.grid.shapes, (t4, g4)
    assert run_grid.shapes_for(t4.grid, "inkling_like", t4.tokens) == ["inkling_like"]
    for shape in t4.grid.shapes:
        with open(run_grid.config_path(shape, f4, t4.grid.configs)) as f:
            text = f.read()
        assert "backend: trtllm_style" in text and f"format: {f4}" in text, shape
    for shape in g4.grid.shapes:
        ours = run_grid.config_path(shape, f4, g4.grid.configs)
        assert os.path.exists(ours) and run_grid.config_max_tokens(ours) == 512, ours
with tempfile.TemporaryDirectory() as d:  # a config whose backend cannot be swapped is refused
    cfg = os.path.join(d, "c.yaml")
    with open(cfg, "w") as f:
        f.write("problem: {experts: 8}\n")
    msg = exits(run_grid.rival_config, d, cfg, "deepgemm_style")
    assert f"{cfg}: no single 'backend:' line to name deepgemm_style in" in msg, msg
msg = usage_error(["--out", "o", "--format", "bf16", "--backend", "deepgemm_style"])
assert "grids: --format bf16 --backend trtllm_style, " in msg, msg
assert "no deepgemm_style bf16 grid" in usage_error(["--out", "o", "--backend", "deepgemm_style"])
assert "invalid choice: 'nope'" in usage_error(["--out", "o", "--backend", "nope"])

# --- shapes, configs and token counts per grid ---
G = "1,8,64,512,4096,16384"
assert run_grid.shapes_for(bf16, None, G) == [
    "qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v3", "inkling_like"]
assert run_grid.shapes_for(fp8, None, G) == [  # deepgemm_style runs the sinks apart in bf16
    "qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v3", "inkling_like"]
assert run_grid.shapes_for(fp8, "deepseek_v3", G) == ["deepseek_v3"]
assert run_grid.config_path("inkling_like", "fp8_block") == \
    "configs/bench/inkling_like_fp8_block.yaml"
msg = exits(run_grid.shapes_for, fp8, "nope", G)
assert "no configs/bench/nope_fp8_block.yaml" in msg, msg
assert run_grid.config_path("mixtral_8x7b", "fp8_block") == "configs/bench/mixtral_8x7b_fp8_block.yaml"
assert run_grid.grid_configs(fp8, "qwen3_30b_a3b") == [
    "configs/bench/qwen3_30b_a3b_fp8_block.yaml", "configs/bench/qwen3_30b_a3b_bf16.yaml"]
assert run_grid.grid_configs(bf16, "qwen3_30b_a3b") == ["configs/bench/qwen3_30b_a3b_bf16.yaml"]
# cutlass_mega: its own configs (max_tokens 512), trtllm_style's bf16 ones next to them.
assert run_grid.grid_configs(mega, "deepseek_v3") == [
    "configs/bench/mega/deepseek_v3_bf16.yaml", "configs/bench/deepseek_v3_bf16.yaml"]
D = m.tokens
assert run_grid.shapes_for(mega, None, D) == [
    "qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v3", "inkling_like"]  # sinks as virtual experts
# fp8_block and 4-bit Inkling-like: the bf16 sinks in a second launch of the bf16 kernel.
assert run_grid.shapes_for(mega8.grid, "mixtral_8x7b,inkling_like", D) == [
    "mixtral_8x7b", "inkling_like"]
msg = exits(run_grid.shapes_for, mega, "nope", D)
assert "no configs/bench/mega/nope_bf16.yaml" in msg, msg
msg = exits(run_grid.shapes_for, mega, "qwen3_30b_a3b", "1,512,1024,4096")
assert "--tokens 1024,4096: above max_tokens=512 of configs/bench/mega/qwen3_30b_a3b_bf16.yaml" \
       in msg and "default tokens: 1,2,4,8,16,32,64,128,512" in msg, msg
assert run_grid.config_max_tokens("configs/bench/qwen3_30b_a3b_bf16.yaml") == 16384
assert run_grid.grid_configs(mega8.grid, "mixtral_8x7b") == [
    "configs/bench/mega/mixtral_8x7b_fp8_block.yaml", "configs/bench/mixtral_8x7b_bf16.yaml"]
assert run_grid.shapes_for(mega8.grid, None, D) == list(run_grid.SHAPES)
assert run_grid.config_max_tokens("configs/bench/mega/deepseek_v3_fp8_block.yaml") == 512


def problem_of(path):
    """The config's backend and its problem's keys (flow mapping), max_tokens apart."""
    text = open(path).read()
    body = re.search(r"problem:\s*\{(.*?)\}", text, re.S).group(1)
    kv = dict(re.match(r"\s*(\w+):\s*(\S+)\s*$", f).groups() for f in body.split(","))
    return re.search(r"^backend:\s*(\S+)", text, re.M).group(1), kv


# Every shape of the bf16 grid is in cutlass_mega's, or refused with its reason; each of its
# configs names cutlass_mega, fits its schedule (max_tokens x (top_k + the sinks' virtual experts,
# one each where sink_intermediate <= intermediate) <= 4096 slots) and holds trtllm_style's
# problem but for max_tokens, so both draw the same routing.
assert set(bf16.shapes) == set(mega.shapes) | {
    s for (f, b, s) in run_grid.REFUSED if (f, b) == ("bf16", "cutlass_mega")}
assert sorted(glob.glob("configs/bench/mega/*_bf16.yaml")) == sorted(
    run_grid.config_path(s, "bf16", mega.configs) for s in mega.shapes)
for shape in mega.shapes:
    ours, theirs = run_grid.grid_configs(mega, shape)
    (b_ours, p_ours), (b_theirs, p_theirs) = problem_of(ours), problem_of(theirs)
    assert b_ours == "cutlass_mega" and b_theirs == "trtllm_style", (ours, theirs)
    sinks = int(p_ours.get("sink_experts", 0))
    assert sinks == 0 or int(p_ours["sink_intermediate"]) <= int(p_ours["intermediate"]), ours
    slots = int(p_ours["top_k"]) + sinks
    assert int(p_ours.pop("max_tokens")) == 512 and slots * 512 <= 4096, ours
    assert p_ours["format"] == "bf16", ours
    p_theirs.pop("max_tokens")
    assert p_ours == p_theirs, (ours, p_ours, p_theirs)

assert run_grid.grid_report.PEERS_BY_FORMAT["fp8_block"] == ("torch_scaled_grouped_mm", "triton")
# fp8_tensor: trtllm_style's e4m3 GEMMs against the same fp8 peers, trtllm_style bf16 beside it;
# inkling_like refused (sinks are bf16), the grid's file names its backend and format.
t8 = run_grid.parse_args(["--out", "o", "--format", "fp8_tensor"])
assert t8.backend == "trtllm_style" and t8.grid.bf16_backend, t8
assert t8.grid == run_grid.GRIDS["fp8_tensor", "trtllm_style"] and t8.tokens == run_grid.GRID_TOKENS
assert run_grid.PEER_RUNNERS["fp8_tensor"] is run_grid.peers_for_fp8_block
assert run_grid.grid_report.PEERS_BY_FORMAT["fp8_tensor"] == ("torch_scaled_grouped_mm", "triton")
assert run_grid.grid_configs(t8.grid, "mixtral_8x7b") == [
    "configs/bench/mixtral_8x7b_fp8_tensor.yaml", "configs/bench/mixtral_8x7b_bf16.yaml"]
assert run_grid.shapes_for(t8.grid, None, t8.tokens) == [
    "qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v3"]
msg = exits(run_grid.shapes_for, t8.grid, "inkling_like", t8.tokens)
assert "inkling_like's sink experts are bf16" in msg, msg
assert run_grid.grid_stem("o", "D", t8.grid) == os.path.join("o", "D_trtllm_style_fp8_tensor_grid")
assert run_grid.grid_report.PEERS_BY_FORMAT["bf16"] == ("torch_grouped_mm", "triton", "cublas")
assert run_grid.grid_stem("o", "D", bf16) == os.path.join("o", "D_trtllm_style_bf16_grid")
assert run_grid.grid_stem("o", "D", fp8) == os.path.join("o", "D_deepgemm_style_fp8_block_grid")
assert run_grid.grid_stem("o", "D", mega) == os.path.join("o", "D_cutlass_mega_bf16_grid")
# bf16 keeps today's files, fp8_block its own; cutlass_mega's are named for it, so the two bf16
# grids can share --out.
assert run_grid.paths("o", bf16) == {"jsonl": os.path.join("o", "ours.jsonl"),
                                     "routing": os.path.join("o", "routing")}
assert run_grid.paths("o", fp8) == {
    "jsonl": os.path.join("o", "ours_fp8_block.jsonl"),
    "routing": os.path.join("o", "routing_fp8_block"),
    "bf16_jsonl": os.path.join("o", "bf16_backend_fp8_block.jsonl"),
    "bf16_routing": os.path.join("o", "routing_fp8_block_bf16_backend")}
assert run_grid.paths("o", mega) == {
    "jsonl": os.path.join("o", "ours_cutlass_mega_bf16.jsonl"),
    "routing": os.path.join("o", "routing_cutlass_mega_bf16"),
    "bf16_jsonl": os.path.join("o", "bf16_backend_cutlass_mega_bf16.jsonl"),
    "bf16_routing": os.path.join("o", "routing_cutlass_mega_bf16_bf16_backend")}
# --strict: moe bench refuses to time a config's fallback in place of the backend it names.
assert run_grid.bench_cmd(a, "c.yaml", "s", "D", "j", "r", "64") == [
    "build/bin/moe", "bench", "--strict", "--config", "c.yaml", "--tokens",
    "1,8,64,512,4096,16384", "--jsonl", "j", "--device", "D", "--commit", "unknown", "--shape", "s",
    "--dump-routing", "r", "--check-max-tokens", "64"]
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
# cutlass_mega's grid takes bf16 records of cutlass_mega only: not its fallback's, and not
# trtllm_style's (the same format: only the backend tells them apart).
mega_recs = [rec("s", 1, 0.5, "cutlass_mega", "bf16"), rec("s", 8, 1.0, "cutlass_mega", "bf16")]
run_grid.check_records(mega_recs, ["s"], "1,8", "c", "cutlass_mega", "bf16")
for other in ("reference", "trtllm_style"):
    msg = exits(run_grid.check_records, [mega_recs[0], rec("s", 8, 1.0, other, "bf16")], ["s"],
                "1,8", "c", "cutlass_mega", "bf16")
    assert f"('{other}', 'bf16')" in msg and "expected ('cutlass_mega', 'bf16')" in msg, msg

trt = [rec("s", 8, 4.0, "trtllm_style", "bf16", floor_ms=2.0),
       rec("s", 1, 1.0, "trtllm_style", "bf16", floor_ms=0.25)]
run_grid.add_bf16_backend(good, trt, lambda s, t: t == 1)
assert good[0]["bf16_backend_ms"] == 1.0 and good[0]["ratio_to_bf16_backend"] == 0.5, good[0]
assert good[1]["bf16_backend_ms"] == 4.0 and good[1]["ratio_to_bf16_backend"] == 0.25, good[1]
assert good[0]["bf16_backend_floor_ms"] == 0.25 and good[1]["bf16_backend_floor_ms"] == 2.0, good
assert good[0]["bf16_backend"] == good[1]["bf16_backend"] == "trtllm_style", good
assert good[0]["bf16_backend_same_routing"] and not good[1]["bf16_backend_same_routing"]
run_grid.add_bf16_backend(mega_recs, trt, lambda s, t: True)
assert [r["ratio_to_bf16_backend"] for r in mega_recs] == [0.5, 0.25], mega_recs

r = rec("s", 1, 0.5, peers={"torch_scaled_grouped_mm": 1.0, "triton": 0.25, "error": "x"},
        ms_stream=0.6, peers_eager={"torch_scaled_grouped_mm": 1.2})
run_grid.add_peer_ratios(r)
assert r["ratio_to_best_peer"] == 2.0 and r["ratio_to_best_peer_eager"] == 0.5, r
r = rec("s", 1, 0.5, peers={"error": "both failed"})
run_grid.add_peer_ratios(r)
assert r["ratio_to_best_peer"] is None and "ratio_to_best_peer_eager" not in r, r

# --- whole runs against a fake moe: fp8_block, bf16, then cutlass_mega bf16 ---
# It runs as the config's backend (trtllm_style 2 ms per token, the others 1), or, for the backend
# named by FAKE_MOE_REFUSES, fails under --strict as moe bench does, or (FAKE_MOE_NO_STRICT, a moe
# that would let the fallback through) writes the fallback's records.
FAKE_MOE = r'''
import json, os, re, sys
sets = lambda t: 2 if t >= 512 else 3  # input sets timed (moe bench: fewer at large T)
strict = "--strict" in sys.argv
argv = [x for x in sys.argv if x != "--strict"]
a = dict(zip(argv[2::2], argv[3::2]))
with open(os.environ["FAKE_MOE_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
text = open(a["--config"]).read()
backend = re.search(r"^backend:\s*(\S+)", text, re.M).group(1)
fmt = re.search(r"\bformat:\s*(\w+)", text).group(1)
if os.environ.get("FAKE_MOE_FAIL") == backend:
    sys.exit(3)
if os.environ.get("FAKE_MOE_REFUSES") == backend:
    if strict and not os.environ.get("FAKE_MOE_NO_STRICT"):
        sys.exit(f"error: backend '{backend}' named in {a['--config']} does not support ...; "
                 "--strict refuses its fallback 'reference'")
    backend = "reference"
for t in a["--tokens"].split(","):
    t = int(t)
    r = {"date": "D", "device": a["--device"], "commit": a["--commit"],
         "backend": backend, "format": fmt,
         "shape": a["--shape"], "experts": 8, "top_k": 2, "hidden": 128, "intermediate": 128,
         "sink_experts": 0, "sink_intermediate": 0, "input_sets": sets(t),
         "tokens": t, "ms": (2.0 if backend == "trtllm_style" else 1.0) * t, "tflops": 1.0,
         "weight_tbps": 1.0, "floor_ms": 0.5 * t, "graph": t <= 64,
         "ms_stream": 1.5 * t if t <= 64 else None, "peers": {}}
    with open(a["--jsonl"], "a") as f:
        f.write(json.dumps(r) + "\n")
    # Every input set's routing; FAKE_MOE_DIFFER: trtllm_style's last set differs.
    for s in range(sets(t)):
        differ = (backend == "trtllm_style" and s == sets(t) - 1 and
                  os.environ.get("FAKE_MOE_DIFFER") == f"{a['--shape']}_{t}")
        with open(os.path.join(a["--dump-routing"], f"{a['--shape']}_{t}_{s}.safetensors"),
                  "w") as f:
            f.write("other" if differ else f"routing {a['--shape']} {t} {s}")
'''


class FakeCuda:
    @staticmethod
    def get_device_name(i):
        return "FakeGPU"


sys.modules["torch"] = types.SimpleNamespace(cuda=FakeCuda)
peer_calls = []


def fake_peers(fmt):
    def run(rec, routings, peers_dir):
        peer_calls.append((fmt, rec["shape"], rec["tokens"], [open(f).read() for f in routings],
                           peers_dir))
        if rec["tokens"] == 8:
            raise RuntimeError("peer cannot run this point")
        names = run_grid.grid_report.PEERS_BY_FORMAT[fmt]
        return ({n: 0.5 * rec["tokens"] for n in names}, {n: True for n in names},
                {n: 0.75 * rec["tokens"] for n in names} if rec["graph"] else {})
    return run


run_grid.PEER_RUNNERS = {f: fake_peers(f) for f in run_grid.DEFAULT_BACKEND}
date = run_grid.time.strftime("%Y-%m-%d")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def options(call):
    """A logged moe command line's options (its one flag, --strict, apart)."""
    assert call[:2] == ["bench", "--strict"], call
    return dict(zip(call[2::2], call[3::2]))


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
    stale = os.path.join(out, "routing_fp8_block", "qwen3_30b_a3b_1_5.safetensors")
    with open(stale, "w") as f:
        f.write("stale")
    os.environ["FAKE_MOE_DIFFER"] = "deepseek_v3_64"
    argv = ["--moe", moe, "--peers", "P", "--out", out, "--format", "fp8_block", "--shapes",
            "qwen3_30b_a3b,deepseek_v3", "--tokens", "1,8,64,512", "--commit", "abc",
            "--check-max-tokens", "deepseek_v3=8,default=64"]
    run_grid.main(argv)
    calls = read_jsonl(log)
    assert [options(c)["--config"] for c in calls] == [
        "configs/bench/qwen3_30b_a3b_fp8_block.yaml", "configs/bench/qwen3_30b_a3b_bf16.yaml",
        "configs/bench/deepseek_v3_fp8_block.yaml", "configs/bench/deepseek_v3_bf16.yaml"], calls
    for c in calls:
        kw = options(c)
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
    # Each point's peers get every input set moe bench timed, in order (the stale 6th is gone).
    assert all(p[0] == "fp8_block" and p[4] == "P" and
               p[3] == [f"routing {p[1]} {p[2]} {s}" for s in range(2 if p[2] >= 512 else 3)]
               for p in peer_calls), peer_calls
    assert not os.path.exists(stale)
    stem = os.path.join(out, f"{date}_deepgemm_style_fp8_block_grid")
    recs = read_jsonl(stem + ".jsonl")
    assert [(r["shape"], r["tokens"]) for r in recs] == [
        (s, t) for s in ("qwen3_30b_a3b", "deepseek_v3") for t in (1, 8, 64, 512)], recs
    r1, r8 = recs[0], recs[1]
    assert r1["ms"] == 1.0 and r1["bf16_backend_ms"] == 2.0 and r1["ratio_to_bf16_backend"] == 0.5
    assert r1["bf16_backend"] == "trtllm_style" and r1["bf16_backend_floor_ms"] == 0.5, r1
    assert r1["peers"] == {"torch_scaled_grouped_mm": 0.5, "triton": 0.5}, r1
    assert r1["ratio_to_best_peer"] == 2.0 and r1["ratio_to_best_peer_eager"] == 2.0, r1
    assert r8["peers"] == {"error": "peer cannot run this point"} and r8["bf16_backend_ms"] == 16.0
    assert r8["ratio_to_best_peer"] is None, r8
    assert [r["bf16_backend_same_routing"] for r in recs] == [True] * 6 + [False, True], recs
    md = open(stem + ".md").read()
    assert md.startswith("# deepgemm_style fp8_block on FakeGPU"), md
    assert "this checkout is at" not in md, md  # the device copy's git state says nothing
    assert "| torch_scaled_grouped_mm | triton | floor ms |" in md, md
    assert ("| qwen3_30b_a3b | 1 | 1.0000 | 0.5000 | 0.5000 | 0.5000 | 2.00 | 2.0000 | 1.00 | "
            "2.0000 | 4.00 | 0.5000 | 1.0 | yes | torch_scaled_grouped_mm, triton | 2.0000 |"
            ) in md, md
    assert "At 1 point(s) trtllm_style's routing differed from deepgemm_style's (deepseek_v3 " \
           "T=64)" in md, md

    # bf16: today's configs, files and stem; no bf16-backend run or fields.
    open(log, "w").close()
    peer_calls.clear()
    run_grid.main(["--moe", moe, "--out", out, "--shapes", "mixtral_8x7b", "--tokens", "1,4096",
                   "--commit", "abc"])
    calls = read_jsonl(log)
    assert len(calls) == 1 and options(calls[0])["--config"] == \
        "configs/bench/mixtral_8x7b_bf16.yaml", calls
    assert calls[0][calls[0].index("--jsonl") + 1] == os.path.join(out, "ours.jsonl"), calls
    assert calls[0][calls[0].index("--dump-routing") + 1] == os.path.join(out, "routing"), calls
    recs = read_jsonl(os.path.join(out, f"{date}_trtllm_style_bf16_grid.jsonl"))
    assert [r["tokens"] for r in recs] == [1, 4096] and recs[0]["peers"]["cublas"] == 0.5, recs
    assert not any(k.startswith("bf16_backend") for r in recs for k in r), recs
    assert list(recs[0])[-5:] == ["peers", "peers_graph", "peers_eager", "ratio_to_best_peer",
                                  "ratio_to_best_peer_eager"], list(recs[0])
    md = open(os.path.join(out, f"{date}_trtllm_style_bf16_grid.md")).read()
    assert md.startswith("# trtllm_style bf16 on FakeGPU") and "x trtllm_style" not in md, md
    assert "| shape | T | trtllm_style ms | torch_grouped_mm | triton | cublas | floor ms |" in md

    # A failed moe bench, of ours or of the bf16 backend, writes no grid.
    os.environ["FAKE_MOE_FAIL"] = "trtllm_style"
    os.remove(stem + ".jsonl")
    msg = exits(run_grid.main, argv)
    assert "moe bench failed for qwen3_30b_a3b (trtllm_style bf16) (exit 3)" in msg, msg
    assert not os.path.exists(stem + ".jsonl")
    os.environ["FAKE_MOE_FAIL"] = "deepgemm_style"
    assert "moe bench failed for qwen3_30b_a3b (exit 3)" in exits(run_grid.main, argv)
    del os.environ["FAKE_MOE_FAIL"]
    # A refused shape (inkling_like in trtllm_style's fp8_tensor grid) fails before anything runs.
    open(log, "w").close()
    msg = exits(run_grid.main, argv[:-6] + ["--shapes", "inkling_like", "--format", "fp8_tensor",
                                            "--backend", "trtllm_style"])
    assert "--shapes inkling_like: inkling_like's sink experts are bf16" in msg, msg
    assert "shapes: qwen3_30b_a3b,mixtral_8x7b,deepseek_v3" in msg and open(log).read() == "", msg

    # cutlass_mega bf16, every default: its configs and the decode token counts, trtllm_style bf16
    # on its own configs in the same run, the bf16 peers on cutlass_mega's routing.
    open(log, "w").close()
    peer_calls.clear()
    os.environ["FAKE_MOE_DIFFER"] = "mixtral_8x7b_2"
    bf16_grid = os.path.join(out, f"{date}_trtllm_style_bf16_grid.jsonl")
    bf16_before = open(bf16_grid).read()
    mega_argv = ["--moe", moe, "--peers", "P", "--out", out, "--format", "bf16", "--backend",
                 "cutlass_mega", "--commit", "abc", "--check-max-tokens",
                 "deepseek_v3=8,default=64"]
    run_grid.main(mega_argv)
    shapes = ("qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v3", "inkling_like")
    tokens = (1, 2, 4, 8, 16, 32, 64, 128, 512)
    calls = [options(c) for c in read_jsonl(log)]
    assert [c["--config"] for c in calls] == [
        cfg for s in shapes for cfg in (f"configs/bench/mega/{s}_bf16.yaml",
                                        f"configs/bench/{s}_bf16.yaml")], calls
    for c in calls:
        ours = "/mega/" in c["--config"]
        assert c["--tokens"] == "1,2,4,8,16,32,64,128,512" and c["--shape"] in c["--config"], c
        assert c["--jsonl"] == os.path.join(
            out, "ours_cutlass_mega_bf16.jsonl" if ours else "bf16_backend_cutlass_mega_bf16.jsonl")
        assert c["--dump-routing"] == os.path.join(
            out, "routing_cutlass_mega_bf16" + ("" if ours else "_bf16_backend")), c
        assert c["--check-max-tokens"] == (
            ("8" if c["--shape"] == "deepseek_v3" else "64") if ours else "0"), c
    assert peer_calls == [
        ("bf16", s, t, [f"routing {s} {t} {i}" for i in range(2 if t >= 512 else 3)], "P")
        for s in shapes for t in tokens]
    stem = os.path.join(out, f"{date}_cutlass_mega_bf16_grid")
    recs = read_jsonl(stem + ".jsonl")
    assert [(r["shape"], r["tokens"]) for r in recs] == [(s, t) for s in shapes for t in tokens]
    assert {(r["backend"], r["format"], r["bf16_backend"]) for r in recs} == {
        ("cutlass_mega", "bf16", "trtllm_style")}, recs
    r1 = recs[0]
    assert r1["ms"] == 1.0 and r1["bf16_backend_ms"] == 2.0 and r1["bf16_backend_floor_ms"] == 0.5
    assert r1["ratio_to_bf16_backend"] == 0.5 and r1["ratio_to_best_peer"] == 2.0, r1
    assert r1["peers"] == {"torch_grouped_mm": 0.5, "triton": 0.5, "cublas": 0.5}, r1
    assert [(r["shape"], r["tokens"]) for r in recs if not r["bf16_backend_same_routing"]] == [
        ("mixtral_8x7b", 2)], recs
    md = open(stem + ".md").read()
    assert md.startswith("# cutlass_mega bf16 on FakeGPU"), md
    assert ("| shape | T | cutlass_mega ms | torch_grouped_mm | triton | cublas | floor ms | x "
            "floor | x best peer | best peer x floor | trtllm_style ms | trtllm_style x floor | x "
            "trtllm_style | TFLOP/s | cutlass_mega graph | peers graph | x best peer, all eager |"
            ) in md, md
    assert ("| qwen3_30b_a3b | 1 | 1.0000 | 0.5000 | 0.5000 | 0.5000 | 0.5000 | 2.00 | 2.0000 | "
            "1.00 | 2.0000 | 4.00 | 0.5000 | 1.0 | yes | torch_grouped_mm, triton, cublas | "
            "2.0000 |") in md, md
    assert "At 1 point(s) trtllm_style's routing differed from cutlass_mega's (mixtral_8x7b T=2)" \
        in md, md
    assert open(bf16_grid).read() == bf16_before  # the trtllm_style grid in the same --out

    # Nothing of cutlass_mega's grid is written when a moe bench fails, when cutlass_mega refuses
    # the problem (--strict: its fallback is never timed), or when records of another backend
    # come back anyway (a moe that let the fallback through, for ours or for trtllm_style).
    def mega_fails(env, argv=mega_argv):
        os.environ.update(env)
        open(log, "w").close()
        if os.path.exists(stem + ".jsonl"):
            os.remove(stem + ".jsonl")
        try:
            return exits(run_grid.main, argv)
        finally:
            assert not os.path.exists(stem + ".jsonl")
            for k in env:
                del os.environ[k]

    msg = mega_fails({"FAKE_MOE_FAIL": "trtllm_style"})
    assert "moe bench failed for qwen3_30b_a3b (trtllm_style bf16) (exit 3)" in msg, msg
    msg = mega_fails({"FAKE_MOE_REFUSES": "cutlass_mega"})
    assert "moe bench failed for qwen3_30b_a3b (exit 1)" in msg and len(read_jsonl(log)) == 1, msg
    msg = mega_fails({"FAKE_MOE_REFUSES": "cutlass_mega", "FAKE_MOE_NO_STRICT": "1"})
    assert "ran (backend, format) [('reference', 'bf16')]; expected ('cutlass_mega', 'bf16')" \
        in msg, msg
    msg = mega_fails({"FAKE_MOE_REFUSES": "trtllm_style", "FAKE_MOE_NO_STRICT": "1"})
    assert "ran (backend, format) [('reference', 'bf16')]; expected ('trtllm_style', 'bf16')" \
        in msg, msg
    # Refused before anything runs: a shape without a config, T above the configs' 512.
    msg = mega_fails({}, mega_argv + ["--shapes", "qwen3_30b_a3b,nope"])
    assert "no configs/bench/mega/nope_bf16.yaml" in msg, msg
    assert open(log).read() == ""
    msg = mega_fails({}, mega_argv + ["--tokens", "1,4096"])
    assert "--tokens 4096: above max_tokens=512 of configs/bench/mega/qwen3_30b_a3b_bf16.yaml" \
        in msg, msg
    assert open(log).read() == ""

    # cutlass_mega fp8_block: trtllm_style bf16 on its configs, and the rival deepgemm_style on
    # cutlass_mega's very configs (the backend line swapped, written under --out), both in the
    # same run; each rival record is checked like ours and its time and ratio land in ours.
    open(log, "w").close()
    peer_calls.clear()
    os.environ["FAKE_MOE_DIFFER"] = ""
    fp8_argv = ["--moe", moe, "--peers", "P", "--out", out, "--format", "fp8_block", "--backend",
                "cutlass_mega", "--shapes", "qwen3_30b_a3b", "--tokens", "1,8", "--commit", "abc"]
    run_grid.main(fp8_argv)
    calls = [options(c) for c in read_jsonl(log)]
    rival_cfg = os.path.join(out, "qwen3_30b_a3b_fp8_block_deepgemm_style.yaml")
    assert [c["--config"] for c in calls] == [
        "configs/bench/mega/qwen3_30b_a3b_fp8_block.yaml", "configs/bench/qwen3_30b_a3b_bf16.yaml",
        rival_cfg], calls
    assert calls[2]["--jsonl"] == os.path.join(
        out, "rival_deepgemm_style_cutlass_mega_fp8_block.jsonl"), calls[2]
    assert calls[2]["--dump-routing"] == os.path.join(
        out, "routing_cutlass_mega_fp8_block_deepgemm_style"), calls[2]
    assert calls[2]["--check-max-tokens"] == "0", calls[2]
    ours_text = open("configs/bench/mega/qwen3_30b_a3b_fp8_block.yaml").read()
    assert open(rival_cfg).read() == ours_text.replace("backend: cutlass_mega",
                                                       "backend: deepgemm_style"), rival_cfg
    stem8 = os.path.join(out, f"{date}_cutlass_mega_fp8_block_grid")
    recs = read_jsonl(stem8 + ".jsonl")
    assert [r["rivals"] for r in recs] == [
        {"deepgemm_style": {"ms": 1.0, "ratio": 1.0, "same_routing": True}},
        {"deepgemm_style": {"ms": 8.0, "ratio": 1.0, "same_routing": True}}], recs
    md = open(stem8 + ".md").read()
    assert "| x trtllm_style | deepgemm_style ms | x deepgemm_style | TFLOP/s |" in md, md
    assert "'deepgemm_style ms': deepgemm_style on cutlass_mega's configs" in md, md
    # A rival that refuses, or records of its fallback, write no grid.
    os.remove(stem8 + ".jsonl")
    os.environ["FAKE_MOE_REFUSES"] = "deepgemm_style"
    msg = exits(run_grid.main, fp8_argv)
    assert "moe bench failed for qwen3_30b_a3b (deepgemm_style) (exit 1)" in msg, msg
    os.environ["FAKE_MOE_NO_STRICT"] = "1"
    msg = exits(run_grid.main, fp8_argv)
    assert "ran (backend, format) [('reference', 'fp8_block')]; expected ('deepgemm_style', " \
        "'fp8_block')" in msg, msg
    assert not os.path.exists(stem8 + ".jsonl")
    del os.environ["FAKE_MOE_REFUSES"], os.environ["FAKE_MOE_NO_STRICT"]
print("ok")
