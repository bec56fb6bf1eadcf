#!/usr/bin/env python3
"""Fails if a GPU plugin's machine code reads or writes local memory other than through the stack
pointer (R1), kernel by kernel.

Why: in session 52 the fused kernel of cutlass_mega read a kernel parameter through a generic
pointer that the compiler had lowered to a local-memory load at an address no thread owns (an
illegal address on the H100, every fused layer broken) while ptxas reported no stack and no
spills. Every local access our kernels make today is a stack slot addressed from R1 (+ an
offset), so anything else is flagged. The rule is deliberately stricter than that bug: a stack
array indexed at run time (an address computed from R1 into another register) is flagged too,
and should be read before the rule is relaxed.

usage: check_local_access.py CUOBJDUMP LIBRARY...
exit 0: clean; 1: found, or a library without machine code; 77: no cuobjdump or nvdisasm
"""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

LOCAL = re.compile(r"\b(LDL|STL)(\.[A-Z0-9.]+)?\s.*?\[([^\]]*)\]")
STACK = re.compile(r"^R1(\s*[+-]\s*-?(0x[0-9a-f]+|\d+))?$", re.IGNORECASE)


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
    tool = shutil.which(argv[1])
    if not tool:
        print(f"SKIPPED: no cuobjdump at '{argv[1]}' (scripts/setup.sh installs nvidia-cuda-cuobjdump)")
        return 77
    # cuobjdump runs nvdisasm: from PATH, or beside cuobjdump where both came from PyPI.
    beside = os.path.dirname(os.path.realpath(tool))
    nvdisasm = shutil.which("nvdisasm") or shutil.which("nvdisasm", path=beside)
    if not nvdisasm:
        print("SKIPPED: no nvdisasm for cuobjdump (scripts/setup.sh installs nvidia-cuda-nvdisasm)")
        return 77
    env = dict(os.environ, NVDISASM_PATH=os.path.dirname(nvdisasm))
    env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")

    def check(lib):  # the disassembly is dropped here: only its findings leave the worker
        run = subprocess.run([tool, "-sass", lib], capture_output=True, text=True, env=env)
        return lib, run.returncode, run.stderr.strip(), run.stdout.count("Function :"), offending(run.stdout)

    bad = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(check, argv[2:]))
    for lib, rc, err, kernels, found in results:
        if rc != 0:
            print(f"{lib}: cuobjdump failed: {err}")
            return 1
        if kernels == 0:  # every library named here is a GPU plugin: no SASS means nothing checked
            print(f"{lib}: no machine code to check (a PTX-only build, or not a GPU plugin)")
            return 1
        print(f"{lib}: {kernels} kernels, {len(found)} local accesses not through the stack pointer")
        for kernel, instr in found[:20]:
            print(f"  {kernel}: {instr}")
        bad += len(found)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
