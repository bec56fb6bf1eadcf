#!/usr/bin/env python3
"""A FusedMoE shaped like vLLM's: one MoE layer of a checkpoint, loaded through moe_registry's
checkpoint adapters (the config's `checkpoint:` section) and run through the torch op
torch.ops.moe_registry.moe_layer, on the backend the config selects (`backend:`, `fallback:`) or
the one named by moe_backend (vLLM's --moe-backend).

    python3 tests/fixtures/make_checkpoints.py --out build/fixtures/checkpoints   # a checkpoint
    PYTHONPATH=build/python python3 examples/python/fused_moe.py \\
        --config configs/mixtral_ckpt.yaml [--moe-backend reference] [--compile]

Run it from the repository root: a config's checkpoint path is relative to the current directory.
"""

import argparse

import torch

import moe_registry as moe
from moe_registry import torch_op


def _as_torch(array):
    """A router tensor of Layer.router_tensors(): f32, or bf16 as (uint16 bits, "bf16")."""
    if isinstance(array, tuple):
        return torch.from_numpy(array[0].copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


class FusedMoE(torch.nn.Module):
    """The experts of one layer, as vLLM's FusedMoE:
    forward(hidden_states [T, H] bf16, router_logits [T, E + S] f32) -> [T, H] bf16.

    The weights live where the backend prepared them (host memory for a CPU plugin, the current
    CUDA device for a GPU one; move the module there with .to()). The checkpoint's router comes
    along as buffers, for router_logits()."""

    def __init__(self, config, moe_backend=None, *, registry=None):
        super().__init__()
        self.layer = moe.Layer.from_checkpoint(config, moe_backend, registry=registry)
        p = self.layer.problem
        self.num_experts, self.top_k = p.experts, p.top_k
        self.hidden_size, self.intermediate_size = p.hidden, p.intermediate
        self.router_dtype = torch.float32 if self.layer.router_dtype == "fp32" else torch.bfloat16
        # Plain ints for forward: torch.compile traces Python, not the binding's objects.
        self.real_experts, self.padding_experts = self.layer.real_experts, p.experts - \
            self.layer.real_experts
        router = self.layer.router_tensors()
        for name in ("router_weight", "router_bias", "routing_bias"):
            self.register_buffer(name, _as_torch(router[name]) if name in router else None)
        # The op takes the layer by handle; this module keeps the layer alive.
        self._handle = torch_op.handle(self.layer)

    @property
    def moe_backend(self):
        return self.layer.backend

    def router_logits(self, hidden_states):
        """The checkpoint's gate (docs/design.md §3.4): both operands in router_dtype's precision,
        fp32 sums, + router_bias; padding experts (EP) get -inf, sinks follow them."""
        if self.router_weight is None:
            raise ValueError("the checkpoint has no router weight: pass router_logits to forward")
        weight = self.router_weight.to(self.router_dtype).float()
        logits = torch.nn.functional.linear(hidden_states.to(self.router_dtype).float(), weight,
                                            self.router_bias)
        if self.padding_experts == 0:
            return logits
        real = self.real_experts
        padding = logits.new_full((logits.shape[0], self.padding_experts), float("-inf"))
        return torch.cat([logits[:, :real], padding, logits[:, real:]], dim=1)

    def forward(self, hidden_states, router_logits):
        return torch.ops.moe_registry.moe_layer(hidden_states, [router_logits], self._handle,
                                                self.routing_bias)


class MoEBlock(torch.nn.Module):
    """In place of a model's MoE block (Mixtral's block_sparse_moe, DeepSeek's mlp): the gate, then
    the experts. forward(hidden_states [..., H] bf16) -> the same shape."""

    def __init__(self, config, moe_backend=None, *, registry=None):
        super().__init__()
        self.experts = FusedMoE(config, moe_backend, registry=registry)

    def forward(self, hidden_states):
        flat = hidden_states.reshape(-1, hidden_states.shape[-1])
        out = self.experts(flat, self.experts.router_logits(flat))
        return out.reshape(hidden_states.shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="a YAML config with a checkpoint: section")
    ap.add_argument("--moe-backend", default=None, help="a plugin name, or auto (default: config)")
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True) first")
    args = ap.parse_args()

    block = MoEBlock(args.config, args.moe_backend)
    layer = block.experts.layer
    device = "cuda" if layer.memory == "cuda_device" else "cpu"
    block.to(device)
    hidden = torch.randn(args.tokens, layer.problem.hidden, device=device).to(torch.bfloat16)
    run = torch.compile(block, fullgraph=True) if args.compile else block
    out = run(hidden)
    direct = layer(hidden, block.experts.router_logits(hidden), bias=block.experts.routing_bias)
    print(f"backend: {layer.backend}\nweights: {layer.weights_from}")
    print(f"output:  {tuple(out.shape)} {out.dtype}; the same as the layer called directly: "
          f"{'yes' if torch.equal(out, direct) else 'NO'}")
    return 0 if torch.equal(out, direct) else 1


if __name__ == "__main__":
    raise SystemExit(main())
