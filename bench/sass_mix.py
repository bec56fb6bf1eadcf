#!/usr/bin/env python3
"""The instruction mix of a kernel's main-loop blocks, from its sm_90a SASS, on any machine: the
static evidence for a consumer-bound kernel when no GPU is at hand (bench/NOTES.md, session 37).
Compiles nothing; reads an object file or a plugin (.o, .a, .so) with cuobjdump, from PATH or from
PyPI's `nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm` wheels, which it unpacks into
~/.cache/moe-registry once.

    python3 bench/sass_mix.py build/plugin_targets/cutlass_mega/libmoe_mega_kernel.a \
        --function 'fused_moeILi2' --from TRYWAIT --to SYNCS.ARRIVE
    python3 bench/sass_mix.py /tmp/wo.o --function grouped_gemm --top 12
    python3 bench/sass_mix.py --sass listing.txt      # a listing cuobjdump -sass wrote

Without --from, each function's whole histogram; with --from/--to, one histogram per block that
starts at an instruction containing --from and ends at the next containing --to (blocks shorter
than --min lines are left out: the waits of the producer). The ALU column sums the integer and
logic instructions that share the ALU pipe (LOP3, SHF, PRMT, LEA, IADD3, ISETP, SEL, ...); IMAD
and the half-precision multiplies run on the FMA pipe.
"""
import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import zipfile

ALU = {"LOP3", "SHF", "PRMT", "LEA", "IADD3", "ISETP", "SEL", "VIADD", "IMNMX", "SGXT", "BMSK",
       "FLO", "POPC", "PLOP3", "MOV", "IABS", "BREV"}


def cuobjdump():
    """cuobjdump from PATH, else from PyPI's wheels (it needs nvdisasm beside it)."""
    found = shutil.which("cuobjdump")
    if found and shutil.which("nvdisasm"):
        return found
    cache = os.path.join(os.path.expanduser("~"), ".cache", "moe-registry", "cuobjdump")
    tools = {}
    for d, _, files in os.walk(cache):
        tools.update({f: os.path.join(d, f) for f in ("cuobjdump", "nvdisasm") if f in files})
    if len(tools) < 2:
        os.makedirs(cache, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm", "-d", cache], check=True)
        for w in os.listdir(cache):
            if w.endswith(".whl"):
                with zipfile.ZipFile(os.path.join(cache, w)) as z:
                    z.extractall(cache)
        for d, _, files in os.walk(cache):
            tools.update({f: os.path.join(d, f) for f in ("cuobjdump", "nvdisasm") if f in files})
        if len(tools) < 2:
            sys.exit("sass_mix.py: no cuobjdump and nvdisasm on PATH or in PyPI's wheels")
    for t in tools.values():
        os.chmod(t, 0o755)
    os.environ["NVDISASM_PATH"] = os.path.dirname(tools["nvdisasm"])
    return tools["cuobjdump"]


def functions(sass):
    """{name: [instruction lines]} of a cuobjdump -sass listing."""
    out, cur = {}, None
    for line in sass.splitlines():
        if "Function :" in line:
            cur = line.split("Function :", 1)[1].strip()
            out[cur] = []
            continue
        # "/*0270*/   LDS.128 R32, [R49] ;   /* 0x... */": the instruction between the address
        # and the semicolon.
        text = line[line.find("*/") + 2:] if line.strip().startswith("/*") else line
        text = text.split(";")[0].strip()
        if cur is not None and text and not text.startswith((".", "-")):
            out[cur].append(text)
    return out


def opcode(instr):
    words = instr.split()
    op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return op.split(".")[0]


def report(name, lines, top):
    mix = collections.Counter(opcode(i) for i in lines)
    alu = sum(n for op, n in mix.items() if op in ALU)
    body = ", ".join(f"{op} {n}" for op, n in mix.most_common(top))
    print(f"{name}: {len(lines)} instructions, ALU {alu}: {body}")


def main(argv):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", nargs="?", help="an object file, archive or plugin")
    ap.add_argument("--sass", help="a `cuobjdump -sass` listing already written, instead")
    ap.add_argument("--function", default="", help="a substring of the functions to show")
    ap.add_argument("--from", dest="start", help="a block starts at an instruction with this")
    ap.add_argument("--to", dest="end", default="SYNCS.ARRIVE")
    ap.add_argument("--min", type=int, default=50)
    ap.add_argument("--top", type=int, default=14)
    a = ap.parse_args(argv)
    if (a.binary is None) == (a.sass is None):
        ap.error("give a binary or --sass LISTING (one of them)")
    if a.sass:
        with open(a.sass) as f:
            sass = f.read()
    else:
        sass = subprocess.run([cuobjdump(), "-sass", a.binary], check=True, capture_output=True,
                              text=True).stdout
    found = functions(sass)
    if not found:
        sys.exit(f"sass_mix.py: {a.sass or a.binary} holds no SASS function (sm_90a code?)")
    shown = 0
    for name, lines in found.items():
        if a.function not in name:
            continue
        shown += 1
        if not a.start:
            report(name, lines, a.top)
            continue
        i = 0
        while i < len(lines):
            if a.start in lines[i]:
                j = next((k for k in range(i + 1, len(lines)) if a.end in lines[k]), len(lines) - 1)
                if j - i + 1 >= a.min:
                    report(f"{name} [{i}, {j}]", lines[i:j + 1], a.top)
                i = j
            i += 1
    if shown == 0:
        sys.exit(f"sass_mix.py: no function's name contains '{a.function}'")


if __name__ == "__main__":
    main(sys.argv[1:])
