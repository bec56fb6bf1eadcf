#!/usr/bin/env python3
"""json_stdout.py PROGRAM ARGS...: runs the program and requires its whole stdout to be one JSON
document; prints that document again on one line with sorted keys, for a test's regex, and its
stderr after it. Exits with the program's status, or 1 when stdout is not one JSON document."""
import json
import subprocess
import sys

res = subprocess.run(sys.argv[1:], capture_output=True, text=True)
try:
    doc = json.loads(res.stdout)
except json.JSONDecodeError as e:
    sys.exit(f"stdout is not one JSON document ({e}):\n{res.stdout}\nstderr:\n{res.stderr}")
print(json.dumps(doc, sort_keys=True))
print(res.stderr, file=sys.stderr)
sys.exit(res.returncode)
