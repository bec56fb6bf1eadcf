"""Runs a bench/ script as a user would, for the tests beside this file: its exit status checked
(`ok`: zero or not), its standard output and error returned together."""
import os
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")


def run_script(name, *args, ok=True):
    r = subprocess.run([sys.executable, os.path.join(BENCH, name), *args], capture_output=True,
                       text=True)
    assert (r.returncode == 0) == ok, (r.returncode, r.stdout, r.stderr)
    return r.stdout + r.stderr
