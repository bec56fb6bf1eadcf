"""Our side of the parity kit: a config for the checkpoint transformers saved, the backends that
support it (`moe select --json`), and `moe run --inputs --output` on each."""
import json
import re
import subprocess


def _yaml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_config(path, backend, problem, checkpoint, tokens):
    """A config in the form of configs/*_ckpt.yaml; checkpoint holds path, convention, prefix,
    layer and router_dtype."""
    lines = [f"# Written by tests/parity/run_parity.py: {checkpoint['path']}",
             f"backend: {backend}", "problem:"]
    lines += [f"  {k}: {_yaml_value(v)}" for k, v in problem.items()]
    lines.append("checkpoint:")
    for k in ("path", "convention", "prefix", "layer", "router_dtype"):
        v = checkpoint[k]
        lines.append(f'  {k}: "{v}"' if isinstance(v, str) else f"  {k}: {v}")
    lines.append(f"tokens: {tokens}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def _call(moe, args):
    return subprocess.run([moe] + args, capture_output=True, text=True)


def version(moe):
    r = _call(moe, ["--version"])
    return r.stdout.strip() or r.stderr.strip()


def select(moe, config):
    """{plugin: (supported, message)} for every plugin the registry found, or raises with moe's
    message when the config itself is refused."""
    r = _call(moe, ["select", "--config", config, "--json"])
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"moe select failed (exit {r.returncode}): {r.stderr.strip()}")
    return {c["name"]: (bool(c["supported"]), c["message"]) for c in doc["considered"]}


def _field(stdout, key):
    m = re.search(rf"^{key}:\s+(.*)$", stdout, re.MULTILINE)
    return m.group(1).strip() if m else None


def run(moe, config, inputs, output, checkpoint=None):
    """`moe run` (on `checkpoint` instead of the config's, when given); exit 3 (disagrees with the
    reference) still writes the output."""
    extra = ["--checkpoint", checkpoint] if checkpoint else []
    r = _call(moe, ["run", "--config", config, "--inputs", inputs, "--output", output] + extra)
    res = {"exit": r.returncode, "weights": _field(r.stdout, "weights"),
           "inputs": _field(r.stdout, "inputs"), "backend": _field(r.stdout, "backend")}
    rel = _field(r.stdout, "rel_err")
    res["rel_err_vs_reference"] = float(rel.split()[0]) if rel else None
    if r.returncode not in (0, 3):
        res["error"] = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
    return res
