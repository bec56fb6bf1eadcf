"""The transformers side of the parity kit: build a tiny random model from an architecture's
config, save_pretrained it in fp32 and bf16, load each back with from_pretrained and run its MoE
block directly on [1, T, H] hidden states, recording what the router hands the experts.

Only public API is used: the config and *ForCausalLM classes, save_pretrained /
from_pretrained, the decoder layers under model.model.layers, and forward hooks.
"""
import glob
import json
import os

import numpy as np
import torch
import transformers
from safetensors import safe_open

from architectures import init_std

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class Unavailable(Exception):
    """This transformers has no class (or module) an architecture needs."""


def versions():
    return {"transformers": transformers.__version__, "torch": torch.__version__}


def _class(name):
    cls = getattr(transformers, name, None)
    if cls is None:
        raise Unavailable(f"transformers {transformers.__version__} has no class {name}")
    return cls


def make_config(arch):
    return _class(arch.config_class)(**arch.config)


def _find(obj, attrs, what):
    for a in attrs:
        if hasattr(obj, a):
            return getattr(obj, a)
    raise Unavailable(f"{type(obj).__name__} has no {what} (looked for {', '.join(attrs)}) in "
                      f"transformers {transformers.__version__}")


def moe_block(model, arch):
    """(the MoE block of arch.layer, its router module)."""
    layer = model.model.layers[arch.layer]
    block = _find(layer, arch.block_attrs, "MoE block")
    return block, _find(block, arch.router_attrs, "router")


def _redraw(block, router, hidden, gain, gen):
    # Realistic scales instead of initializer_range 0.02: unit-variance router logits, so the
    # top-k has both clear choices and the occasional near-tie, and expert activations that
    # leave the near-linear part of SiLU (and reach gpt-oss' clamp with its gain).
    router_params = {id(p) for p in router.parameters()}
    with torch.no_grad():
        for name, p in block.named_parameters():
            std = init_std(name, tuple(p.shape), hidden, gain, id(p) in router_params)
            p.copy_(torch.randn(p.shape, generator=gen) * std)
        for name, b in router.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(torch.randn(b.shape, generator=gen) * 0.1)


def _keep_row(m, e, hidden, name):
    # m: one down matrix, [H, I] or [I, H]; zero all but output row e.
    axes = [d for d in (0, 1) if m.shape[d] == hidden]
    assert len(axes) == 1, f"{name} {tuple(m.shape)}: the probe needs I != H"
    mask = torch.zeros_like(m)
    mask.select(axes[0], e).fill_(1)
    m.mul_(mask)


def _probe_experts(block, experts, hidden):
    """Turns the block into a routing probe: expert e keeps only output row e of its down
    projection, so a token's output is non-zero exactly in the columns of the experts it was
    routed to (down biases and shared experts zeroed). The router is left as it is."""
    assert experts <= hidden
    with torch.no_grad():
        for name, p in block.named_parameters():
            is_down = "down" in name or name.endswith("w2.weight")
            if "shared_expert" in name or (is_down and name.endswith("bias")):
                p.zero_()
            elif is_down and p.dim() == 3:  # stacked [E, H, I] or [E, I, H]
                for e in range(experts):
                    _keep_row(p[e], e, hidden, name)
            elif is_down:  # per expert: ...experts.{e}.<down>.weight
                parts = name.split(".")
                _keep_row(p, int(parts[parts.index("experts") + 1]), hidden, name)


def write_probe(arch, path, dtype, probe_path, experts):
    """Saves the model at `path` with its MoE block made a routing probe (_probe_experts)."""
    model = _from_pretrained(_class(arch.model_class), path, DTYPES[dtype])
    block, _ = moe_block(model, arch)
    _probe_experts(block, experts, model.config.hidden_size)
    model.save_pretrained(probe_path)


def _tensors(path, names):
    out = {}
    for f in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        with safe_open(f, framework="pt") as st:
            out.update({k: st.get_tensor(k) for k in st.keys() if k in names})
    return out


def check_probe_router(path, probe_path, prefix):
    """The probe must route as the checkpoint does: its router tensors (everything of the block
    outside the experts) are the saved ones, bit for bit."""
    names = {k for k in saved_tensors(path) if k.startswith(prefix + ".") and "expert" not in k}
    a, b = _tensors(path, names), _tensors(probe_path, names)
    differ = sorted(k for k in names if k not in b or not torch.equal(a[k], b[k]))
    if not names or differ:
        raise RuntimeError(f"the routing probe's router differs from the checkpoint's: "
                           f"{', '.join(differ) or 'no router tensors under ' + prefix}")


def probe_ids(output, experts):
    """The experts each token reached, from a probe's output [T, H]: its non-zero columns (all
    below E), as sorted id lists."""
    assert not output[:, experts:].any(), "probe output outside the expert columns"
    return [sorted(int(e) for e in np.nonzero(row[:experts])[0]) for row in output]


def _from_pretrained(cls, path, dtype):
    # `dtype` in transformers >= 4.56, `torch_dtype` before.
    try:
        model = cls.from_pretrained(path, dtype=dtype)
    except TypeError:
        model = cls.from_pretrained(path, torch_dtype=dtype)
    if model.dtype != dtype:
        model = cls.from_pretrained(path, torch_dtype=dtype)
    return model.eval()


def build_and_save(arch, seed, work):
    """Saves the tiny model in fp32 (work/fp32) and, loaded from there with dtype=bfloat16, in
    bf16 (work/bf16; modules the model keeps in fp32 stay fp32). Returns {dtype: path}."""
    config = make_config(arch)
    model_cls = _class(arch.model_class)
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    block, router = moe_block(model, arch)
    _redraw(block, router, config.hidden_size, arch.gate_up_gain,
            torch.Generator().manual_seed(seed))
    paths = {d: os.path.join(work, d) for d in DTYPES}
    model.save_pretrained(paths["fp32"])
    _from_pretrained(model_cls, paths["fp32"], torch.bfloat16).save_pretrained(paths["bf16"])
    return paths


def saved_tensors(path):
    """{name: (safetensors dtype, shape)} of every tensor save_pretrained wrote under path."""
    out = {}
    for f in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        with safe_open(f, framework="pt") as st:
            for k in st.keys():
                s = st.get_slice(k)
                out[k] = (s.get_dtype(), list(s.get_shape()))
    return out


def _parse_router_output(out, tokens, experts):
    """The router's logits [T, E] and top-k where its output gives them: transformers >= 5
    routers return (logits, weights, ids), a bare nn.Linear gate the logits alone. Other forms
    (older DeepSeek-V3 and gpt-oss routers return ids with weights or scattered scores) give
    only the ids."""
    def is_logits(t):
        return torch.is_tensor(t) and t.is_floating_point() and tuple(t.shape) == (tokens, experts)
    if torch.is_tensor(out):
        return {"logits": out} if is_logits(out) else {}
    got = {}
    if len(out) == 3 and is_logits(out[0]):
        got["logits"] = out[0]
    ids = [t for t in out if torch.is_tensor(t) and not t.is_floating_point() and t.dim() == 2]
    if ids:
        got["topk_ids"] = ids[0]
    return got


def run_block(arch, path, dtype, hidden_fp32, experts):
    """Loads the model saved at `path` in `dtype`, runs its MoE block on hidden [1, T, H] and
    returns numpy arrays: output [T, H], router logits [T, E] (f32 widened), topk ids and
    weights when the router exposes them, the selection bias, and where the logits came from."""
    model = _from_pretrained(_class(arch.model_class), path, DTYPES[dtype])
    block, router = moe_block(model, arch)
    captured = []
    hook = router.register_forward_hook(lambda m, i, o: captured.append(o))
    hidden = hidden_fp32.to(DTYPES[dtype])
    with torch.no_grad():
        out = block(hidden)
    hook.remove()
    out = out[0] if isinstance(out, (tuple, list)) else out
    tokens = hidden.shape[1]
    got = _parse_router_output(captured[0], tokens, experts) if captured else {}
    source = "router output"
    if "logits" not in got:
        # The router keeps its logits to itself: recompute them from its weight (and bias) in the
        # precision it computes in (DeepSeek-V3-style routers: fp32 whatever the model's dtype).
        w, b = router.weight, getattr(router, "bias", None)
        if arch.selection == "grouped":
            w, b = w.float(), None if b is None else b.float()
        got["logits"] = torch.nn.functional.linear(hidden.reshape(tokens, -1).to(w.dtype), w, b)
        source = "recomputed from router.weight"
    bias = getattr(router, "e_score_correction_bias", None)
    res = {"logits": got["logits"].detach().float().numpy()}
    if "topk_ids" in got:
        res["topk_ids"] = got["topk_ids"].detach().numpy()
    res.update(output=out.detach().float().reshape(tokens, -1).numpy(), logits_source=source,
               bias=None if bias is None else bias.detach().float().numpy(),
               module=type(block).__name__, router_module=type(router).__name__,
               experts_implementation=getattr(model.config, "_experts_implementation", None))
    return res


def hidden_states(tokens, hidden, seed):
    """Unit-variance hidden states [1, T, H] f32, as after a norm."""
    return torch.randn((1, tokens, hidden), generator=torch.Generator().manual_seed(seed + 1))


def write_safetensors(path, arrays):
    from safetensors.numpy import save_file
    save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, path)


def write_hidden(path, hidden_fp32, dtype, logits=None):
    """inputs.safetensors for `moe run --inputs`: hidden_states [T, H] (F32 for an fp32 model,
    BF16 for a bf16 one) and, when given, router_logits [T, E] F32."""
    from safetensors.torch import save_file
    t = {"hidden_states": hidden_fp32[0].to(DTYPES[dtype]).contiguous()}
    if logits is not None:
        t["router_logits"] = torch.from_numpy(np.ascontiguousarray(logits, dtype=np.float32))
    save_file(t, path)


def config_json(path):
    with open(os.path.join(path, "config.json")) as f:
        return json.load(f)
