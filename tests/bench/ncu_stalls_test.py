"""bench/ncu_stalls.py reads an ncu source-page CSV dump (plain or gzip): per kernel the stall
reasons, the instructions holding the most samples, the samples per code region and the opcode
mix of an address range; a file that is not such a dump, or a kernel index past its kernels, is
refused by name."""
import gzip
import os
import tempfile

from bench_script import run_script

header = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
          '"stall_barrier","stall_wait","stall_math","stall_barrier (Not Issued)"')
rows = [
    ('"0x7f0000001000"', '"      IMAD R1, R2, 0x3, RZ"', 10, 100, 0, 8, 2, 0),
    ('"0x7f0000001010"', '"@!P0  LOP3.LUT R3, R1, 0xf, RZ, 0xc0, !PT"', 30, 100, 0, 20, 10, 0),
    ('"0x7f0000001020"', '"      HGMMA.64x128x16.F32.BF16 R24, R88, gdesc[UR4], R24"', 20, 50,
     0, 20, 0, 0),
    ('"0x7f0000002000"', '"      BAR.SYNC.DEFER_BLOCKING 0x1, 0x100"', 40, 10, 40, 0, 0, 40),
]


def dump(kernels):
    lines = []
    for name in kernels:
        lines.append(f'"Kernel Name","{name}",')
        lines.append(header)
        lines += [",".join(str(v) if not isinstance(v, str) else v for v in r) for r in rows]
    return "\n".join(lines) + "\n"


def run(*args, ok=True):
    return run_script("ncu_stalls.py", *args, ok=ok)


with tempfile.TemporaryDirectory() as d:
    plain = os.path.join(d, "src.csv")
    with open(plain, "w") as f:
        f.write(dump(["void k1(P)", "void k2(P)"]))
    packed = os.path.join(d, "src.csv.gz")
    with gzip.open(packed, "wt") as f:
        f.write(dump(["void k1(P)"]))

    out = run(plain, "--regions", "1000=loop,2000=epilogue", "--mix", "1000:2000", "--top", "2")
    assert out.count("kernel void k") == 2, out
    assert "4 instructions, 100 samples" in out, out
    # Reasons over every sample: barrier 40, wait 48, math 12 of 100.
    assert "reasons: wait 48.0%, barrier 40.0%, math 12.0%" in out, out
    assert "region start          0.0% of samples, 0 instructions" in out, out
    assert ("region loop          60.0% of samples, 3 instructions, 250 executed: wait 80%, "
            "math 20%\n") in out, out
    assert ("region epilogue      40.0% of samples, 1 instructions, 10 executed: "
            "barrier 100%\n") in out, out
    # The two instructions with the most samples, the predicate left out of the opcode mix.
    first = out.splitlines()[5]
    assert first.startswith("  02000  40.0%") and "BAR.SYNC" in first and "barrier=40" in first, out
    assert "01010  30.0%" in out.splitlines()[6], out
    assert "opcodes in [01000, 02000): 3: IMAD 1, LOP3 1, HGMMA 1" in out, out

    out = run(packed, "--kernel", "0")
    assert out.count("kernel void k1") == 1, out

    assert "holds 2 kernel(s)" in run(plain, "--kernel", "2", ok=False)
    bad = os.path.join(d, "bad.csv")
    with open(bad, "w") as f:
        f.write("a,b\n1,2\n")
    assert "no 'Kernel Name' rows" in run(bad, ok=False)
    assert "is not ADDRESS=LABEL" in run(plain, "--regions", "1000", ok=False)
print("ok")
