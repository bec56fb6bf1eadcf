#!/usr/bin/env python3
"""Fails if a GPU plugin's machine code reads or writes local memory other than through the stack
pointer (R1), kernel by kernel.

Why: in session 52 the fused kernel of cutlass_mega read a kernel parameter through a generic
pointer that the compiler had lowered to a local-memory load at an address no thread owns (an
illegal address on the H100, every fused layer broken) while ptxas reported no stack and no
spills. Every local access our kernels make legitimately is a stack slot addressed from R1, so
anything else is that class of bug, visible here without a GPU.

usage: check_local_access.py CUOBJDUMP LIBRARY...   (exit 0 clean, 1 found, 77 no cuobjdump)
"""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

LOCAL = re.compile(r"\b(LDL|STL)(\.[A-Z0-9.]+)?\s.*?\[([^\]]*)\]")
STACK = re.compile(r"^R1(\s*[+-]\s*(0x[0-9a-f]+|\d+))?$", re.IGNORECASE)


def offending(sass):
    """(kernel, instruction) pairs whose local address is not R1 (+ offset)."""
    kernel, found = "?", []
    for line in sass.splitlines():
        if "Function :" in line:
            kernel = line.split("Function :", 1)[1].strip()
            continue
        m = LOCAL.search(line)
        if m and not STACK.match(m.group(3).strip()):
            text = line.split("*/", 1)[1] if "*/" in line else line
            found.append((kernel, re.sub(r"\s+", " ", text.split(";")[0]).strip()))
    return found


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    tool = argv[1]
    if not shutil.which(tool):
        print(f"SKIPPED: no cuobjdump at '{tool}' (scripts/setup.sh installs nvidia-cuda-cuobjdump)")
        return 77
    # cuobjdump runs nvdisasm, found beside it where both came from PyPI.
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(os.path.abspath(shutil.which(tool))) + os.pathsep + env.get("PATH", "")
    def disassemble(lib):
        return lib, subprocess.run([tool, "-sass", lib], capture_output=True, text=True, env=env)

    bad = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = list(pool.map(disassemble, argv[2:]))
    for lib, run in runs:
        if run.returncode != 0 and "does not contain device code" not in run.stderr:
            print(f"{lib}: cuobjdump failed: {run.stderr.strip()}")
            return 1
        kernels = run.stdout.count("Function :")
        found = offending(run.stdout)
        print(f"{lib}: {kernels} kernels, {len(found)} local accesses not through the stack pointer")
        for kernel, instr in found[:20]:
            print(f"  {kernel}: {instr}")
        bad += len(found)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
