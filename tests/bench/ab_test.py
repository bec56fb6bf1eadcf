"""bench/ab.py without a GPU: variants' configs, interleaved rounds, the plugin directory of one
variant, the table of best times and ratios, a failing variant and argument errors, against a
fake `moe` that times a variant by its options."""
import contextlib
import io
import json
import os
import stat
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(root, "bench"))
import ab  # noqa: E402

# The fake tool: `moe bench --config C --tokens T ... --jsonl J`; ms = tokens / 1000 x a factor
# from the options (token_tile 96: 0.8, with a gpu_clock) and x 2 with a plugin directory;
# token_tile 48 fails.
# Each call appends its argv to calls.log.
FAKE = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")
with open(log, "a") as f:
    f.write(json.dumps({"argv": args, "plugins": os.environ.get("MOE_PLUGIN_PATH"),
                        "pdl": os.environ.get("MOE_PDL")}) + "\n")
opt = lambda k: args[args.index(k) + 1]
text = open(opt("--config")).read()
if "token_tile: 48" in text:
    print("error: trtllm_style: token_tile '48' is not auto, ...", file=sys.stderr)
    sys.exit(3)
if "token_tile: 24" in text:  # a hang
    import time
    time.sleep(60)
assert "--strict" in args and opt("--check-max-tokens") == "0"
factor = 0.8 if "token_tile: 96" in text else 1.0
if os.environ.get("MOE_PLUGIN_PATH"):
    factor *= 2
if "token_tile: 128" in text and ".round2." in opt("--jsonl"):  # noise: its second round slower
    factor *= 1.05
with open(opt("--jsonl"), "a") as f:
    for t in opt("--tokens").split(","):
        clock = {"sm_mhz_mean": 1400.0, "power_w_mean": 690.0} if factor == 0.8 else None
        f.write(json.dumps({"tokens": int(t), "ms": int(t) / 1000 * factor,
                            "commit": opt("--commit"), "gpu_clock": clock}) + "\n")
'''


def usage_error(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            ab.parse_args(argv)
        except SystemExit as e:
            assert e.code == 2, (argv, e.code)
            return err.getvalue()
    raise AssertionError(f"{argv} parsed")


with tempfile.TemporaryDirectory() as tmp:
    moe = os.path.join(tmp, "moe")
    with open(moe, "w") as f:
        f.write(FAKE)
    os.chmod(moe, os.stat(moe).st_mode | stat.S_IEXEC)
    config = os.path.join(tmp, "c.yaml")
    with open(config, "w") as f:
        f.write("backend: trtllm_style\nfallback: [reference]\nproblem: {experts: 8}\n")
    out = os.path.join(tmp, "out")
    base = ["--moe", moe, "--config", config, "--tokens", "64,256", "--out", out,
            "--commit", "abc1234"]

    # Three variants, two rounds, one with a plugin directory.
    so = io.StringIO()
    with contextlib.redirect_stdout(so):
        rc = ab.main(base + ["--variant", "128=token_tile: 128", "--variant", "96=token_tile: 96",
                             "--variant", "old=", "--plugins", f"old={tmp}/alt"])
    assert rc == 0, rc
    calls = [json.loads(x) for x in open(os.path.join(tmp, "calls.log"))]
    order = [os.path.basename(c["argv"][c["argv"].index("--config") + 1]) for c in calls]
    assert order == ["128.yaml", "96.yaml", "old.yaml"] * 2, order  # interleaved rounds
    assert [c["plugins"] for c in calls[:3]] == [None, None, os.path.join(tmp, "alt")], calls
    assert all(c["argv"][c["argv"].index("--graph") + 1] == "auto" for c in calls), calls
    assert open(os.path.join(out, "96.yaml")).read().endswith("options: {token_tile: 96}\n")
    assert open(os.path.join(out, "old.yaml")).read() == open(config).read()
    records = [json.loads(x) for x in open(os.path.join(out, "ab.jsonl"))]
    assert len(records) == 3 * 2 * 2, len(records)
    r = records[0]
    assert r["variant"] == "128" and r["options"] == "token_tile: 128" and r["round"] == 1, r
    assert r["commit"] == "abc1234", r
    md = open(os.path.join(out, "ab.md")).read()
    assert md in so.getvalue(), (md, so.getvalue())  # printed as written
    assert "| T | 128 ms | 96 ms | old ms | 96 / 128 | old / 128 |" in md, md
    assert "| 256 | 0.2560 | 0.2048 | 0.5120 | 0.800 | 2.000 |" in md, md
    assert "old: (the config's)" in md and "96: {token_tile: 96}" in md, md
    # The clock and power of the best rounds, where the records have them (here 96's only).
    assert "SM clock MHz / board W while timed" in md and "| 256 | - | 1400 / 690 | - |" in md, md
    # Each variant's spread over its two rounds: 128's second round is 5 % slower.
    assert "Spread over rounds (slowest / fastest round" in md, md
    assert "| 256 | 1.050 | 1.000 | 1.000 |" in md, md

    # --graph reaches every run (off: stream launches, for switches that act on those only).
    os.remove(os.path.join(tmp, "calls.log"))
    with contextlib.redirect_stdout(io.StringIO()):
        rc = ab.main(base + ["--variant", "a=", "--variant", "b=", "--rounds", "1",
                             "--graph", "off"])
    assert rc == 0, rc
    calls = [json.loads(x) for x in open(os.path.join(tmp, "calls.log"))]
    assert [c["argv"][c["argv"].index("--graph") + 1] for c in calls] == ["off"] * 2, calls
    assert "timed: stream launches (no graphs) (--graph off)" in open(
        os.path.join(out, "ab.md")).read()
    usage_error(base + ["--variant", "a=", "--graph", "eager"])

    # A variant that fails: named with its error, the others still run; exit status 1.
    os.remove(os.path.join(tmp, "calls.log"))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = ab.main(base + ["--variant", "a=", "--variant", "bad=token_tile: 48",
                             "--rounds", "2"])
    assert rc == 1, rc
    assert "bad (round 1) failed: exit 3: error: trtllm_style: token_tile '48'" in err.getvalue()
    calls = open(os.path.join(tmp, "calls.log")).read().splitlines()
    assert len(calls) == 3, calls  # a, bad, a: a failed variant is not run again
    md = open(os.path.join(out, "ab.md")).read()
    assert "bad failed: exit 3" in md and "| 64 | 0.0640 | - | - |" in md, md

    # A variant that hangs: killed at --timeout, named as timed out, the others still run.
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = ab.main(base + ["--variant", "a=", "--variant", "hang=token_tile: 24",
                             "--rounds", "1", "--timeout", "2"])
    assert rc == 1, rc
    assert "hang (round 1) failed: timed out after 2 s" in err.getvalue(), err.getvalue()
    md = open(os.path.join(out, "ab.md")).read()
    assert "hang failed: timed out" in md and "| 64 | 0.0640 | - | - |" in md, md

    # A variant on a config of its own (static against dynamic scales): its YAML is that config's,
    # with its options; the table names it.
    other = os.path.join(tmp, "static.yaml")
    with open(other, "w") as f:
        f.write("backend: trtllm_style\nproblem: {experts: 8, input_format: fp8_tensor_static}\n")
    with contextlib.redirect_stdout(io.StringIO()):
        rc = ab.main(base + ["--variant", "dyn=", "--variant", "static=token_tile: 96",
                             "--config-of", f"static={other}", "--rounds", "1"])
    assert rc == 0, rc
    assert open(os.path.join(out, "dyn.yaml")).read() == open(config).read()
    assert open(os.path.join(out, "static.yaml")).read() == (
        open(other).read() + "options: {token_tile: 96}\n")
    md = open(os.path.join(out, "ab.md")).read()
    assert f"configs: static: {other}" in md and "| 256 | 0.2560 | 0.2048 | 0.800 |" in md, md
    assert "Spread over rounds" not in md, md  # one round: no spread to show

    # A variant with an environment variable of its own (dependent launches): only its runs.
    os.environ.pop("MOE_PDL", None)
    os.remove(os.path.join(tmp, "calls.log"))
    with contextlib.redirect_stdout(io.StringIO()):
        rc = ab.main(base + ["--variant", "plain=", "--variant", "pdl=", "--env", "pdl=MOE_PDL=1",
                             "--rounds", "1"])
    assert rc == 0, rc
    calls = [json.loads(x) for x in open(os.path.join(tmp, "calls.log"))]
    assert [c["pdl"] for c in calls] == [None, "1"], calls

    # A config with options of its own does not merge with a variant's.
    with open(config, "a") as f:
        f.write("options: {gemm_tiles: tokens}\n")
    try:
        ab.main(base + ["--variant", "x=token_tile: 64"])
        raise AssertionError("merged options")
    except SystemExit as e:
        assert "has options of its own" in str(e.code), e.code

# Argument errors name the argument.
assert "expected NAME=OPTIONS" in usage_error(["--config", "c", "--tokens", "1", "--out", "o",
                                               "--variant", "no_equals"])
assert "given twice" in usage_error(["--config", "c", "--tokens", "1", "--out", "o",
                                     "--variant", "a=", "--variant", "a=x: 1"])
assert "one of the variants" in usage_error(["--config", "c", "--tokens", "1", "--out", "o",
                                             "--variant", "a=", "--plugins", "b=dir"])
assert "one of the variants" in usage_error(["--config", "c", "--tokens", "1", "--out", "o",
                                             "--variant", "a=", "--config-of", "b=x.yaml"])
assert "given twice" in usage_error(["--config", "c", "--tokens", "1", "--out", "o",
                                     "--variant", "a=", "--config-of", "a=x.yaml",
                                     "--config-of", "a=y.yaml"])
assert "comma-separated" in usage_error(["--config", "c", "--tokens", "1;2", "--out", "o",
                                         "--variant", "a="])
print("ab_test: ok")
assert "expected NAME=VAR=VALUE" in usage_error(["--config", "c", "--tokens", "1", "--out", "o",
                                                 "--variant", "a=", "--env", "a=MOE_PDL"])
assert "expected NAME=VAR=VALUE" in usage_error(["--config", "c", "--tokens", "1", "--out", "o",
                                                 "--variant", "a=", "--env", "b=MOE_PDL=0"])
