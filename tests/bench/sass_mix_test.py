"""bench/sass_mix.py on a cuobjdump -sass listing: each function's opcode histogram and its ALU
sum, the blocks between a start and an end instruction (short ones left out), a function filter;
a listing without functions, a filter that matches none, or no input at all is refused."""
import os
import tempfile

from bench_script import run_script


listing = """
	code for sm_90a
		Function : _Z6kernelILi2EEvv
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R3+URZ], R2 ;  /* 0x0 */
        /*0020*/                   LOP3.LUT R4, R5, 0x81c081c0, RZ, 0xc0, !PT ;   /* 0x0 */
        /*0030*/                   IMAD R6, R4, 0x42, RZ ;                 /* 0x0 */
        /*0040*/              @!P0 SHF.R.U32.HI R7, RZ, 0x3, R5 ;          /* 0x0 */
        /*0050*/                   HMUL2.BF16_V2 R8, R6, R9 ;              /* 0x0 */
        /*0060*/                   HMMA.16816.F32.BF16 R12, R8, R10, R12 ;  /* 0x0 */
        /*0070*/                   SYNCS.ARRIVE.TRANS64.A1T0 RZ, [R10+URZ], RZ ;  /* 0x0 */
        /*0080*/                   EXIT ;                                   /* 0x0 */
		..........
		Function : _Z5otherv
        /*0000*/                   LOP3.LUT R1, R2, 0xf, RZ, 0xc0, !PT ;  /* 0x0 */
        /*0010*/                   EXIT ;                                  /* 0x0 */
"""


def run(*args, ok=True):
    return run_script("sass_mix.py", *args, ok=ok)


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "listing.txt")
    with open(path, "w") as f:
        f.write(listing)

    out = run("--sass", path)
    lines = out.strip().splitlines()
    assert len(lines) == 2, out
    assert lines[0].startswith("_Z6kernelILi2EEvv: 9 instructions, ALU 2:"), lines[0]
    for part in ("LOP3 1", "IMAD 1", "SHF 1", "HMUL2 1", "HMMA 1", "SYNCS 2"):
        assert part in lines[0], (part, lines[0])
    assert lines[1].startswith("_Z5otherv: 2 instructions, ALU 1:"), lines[1]

    # The block from the wait to the release, both included: 7 instructions; --min 8 leaves it out.
    out = run("--sass", path, "--function", "kernelILi2", "--from", "TRYWAIT", "--min", "3")
    assert "[1, 7]: 7 instructions, ALU 2:" in out, out
    assert "other" not in out, out
    out = run("--sass", path, "--function", "kernelILi2", "--from", "TRYWAIT", "--min", "8")
    assert out.strip() == "", out

    assert "no function's name contains 'nothing'" in run("--sass", path, "--function",
                                                         "nothing", ok=False)
    empty = os.path.join(d, "empty.txt")
    with open(empty, "w") as f:
        f.write("Fatbin ptx code:\n")
    assert "holds no SASS function" in run("--sass", empty, ok=False)
    assert "give a binary or --sass" in run(ok=False)
print("sass_mix: ok")
