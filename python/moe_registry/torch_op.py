"""The MoE layer as a torch op, for torch.compile and CUDA graphs:

    from moe_registry import torch_op            # needs torch; `import moe_registry` does not
    out = torch_op.moe_layer(hidden, router_logits, layer)            # route, then run
    out = torch_op.moe_layer(hidden, (topk_ids, topk_weights), layer)
    out = torch.ops.moe_registry.moe_layer(hidden, [router_logits], torch_op.handle(layer))

The op is registered with torch.library.custom_op, schema
``moe_layer(Tensor hidden, Tensor[] routing, int layer, Tensor? routing_bias=None) -> Tensor``:
`routing` holds the router logits alone or (topk_ids, topk_weights); `routing_bias` is the [E] f32
selection bias of a problem with routing_bias. A Layer is no torch type, so the op takes an int
handle (handle(layer)) that refers to the layer weakly: the caller keeps the layer alive.

Its fake implementation checks the arguments and gives the output's shape, so torch.compile traces
the op without running it. The output and the workspaces are torch tensors (the caching allocator;
under CUDA graph capture, the graph's pool) and the op never waits on the device: with its
tensors on the layer's device it can be captured in a CUDA graph. Tensors must be in the layer's
memory (``layer.memory``: CPU tensors for a host plugin, CUDA tensors for a GPU one).
"""

import itertools
import weakref
from typing import List, Optional

import torch

from ._errors import MoeError
from ._layer import Layer

_layers = weakref.WeakValueDictionary()  # handle -> Layer
_handles = itertools.count(1)


def handle(layer):
    """The int the op takes for `layer`, the same for the layer's life."""
    if not isinstance(layer, Layer):
        raise MoeError("invalid_argument",
                       f"layer: expected a moe_registry.Layer, got {type(layer).__name__}")
    number = layer.__dict__.get("_torch_handle")
    if number is None:
        number = next(_handles)
        layer._torch_handle = number
        _layers[number] = layer
    return number


def moe_layer(hidden, routing, layer, *, routing_bias=None):
    """hidden [T, H] bf16; routing: router logits [T, E + S] f32, or (topk_ids [T, k + S] int32,
    topk_weights [T, k + S] f32); layer: a Layer or its handle -> [T, H] bf16, a new tensor."""
    if isinstance(routing, torch.Tensor):
        routing = [routing]
    elif isinstance(routing, (tuple, list)):
        routing = list(routing)
    else:
        raise MoeError("invalid_argument",
                       f"routing: expected router logits or (topk_ids, topk_weights), got "
                       f"{type(routing).__name__}")
    number = layer if isinstance(layer, int) else handle(layer)
    return torch.ops.moe_registry.moe_layer(hidden, routing, number, routing_bias)


def _layer_of(number):
    layer = _layers.get(number)
    if layer is None:
        raise MoeError("invalid_argument",
                       f"layer: no live moe_registry.Layer has handle {number} (take it from "
                       f"torch_op.handle(layer), and keep the layer alive while the op may run)")
    return layer


def _check_tensor(t, name, dtype, shape, device):
    """`shape` holds ints or None (any extent). Works on fake tensors: only metadata is read."""
    if not isinstance(t, torch.Tensor):
        raise MoeError("invalid_argument",
                       f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise MoeError("dtype_mismatch", f"{name}: expected {dtype}, got {t.dtype}")
    if t.dim() != len(shape) or any(w is not None and t.shape[i] != w for i, w in enumerate(shape)):
        want = ", ".join("*" if w is None else str(w) for w in shape)
        raise MoeError("shape_mismatch", f"{name}: expected shape ({want}), got {tuple(t.shape)}")
    if t.device != device:
        raise MoeError("invalid_argument", f"{name}: on {t.device}, expected {device} (as hidden)")
    if not t.is_contiguous():
        raise MoeError("invalid_argument", f"{name}: a non-contiguous view; pass .contiguous()")


def _check(hidden, routing, layer, routing_bias):
    """The op's arguments against the layer (None: a symbolic handle, layer not known)."""
    p = layer.problem if layer is not None else None
    _check_tensor(hidden, "hidden", torch.bfloat16, [None, p.hidden if p else None],
                  getattr(hidden, "device", None))
    if layer is not None:
        want_cuda = layer.memory == "cuda_device"
        if (hidden.device.type == "cuda") != want_cuda:
            raise MoeError("invalid_argument",
                           f"hidden: on {hidden.device}, but the layer's memory is {layer.memory}")
    tokens = hidden.shape[0]
    width = p.top_k + p.sink_experts if p else None
    if len(routing) == 1:
        columns = p.experts + p.sink_experts if p else None
        _check_tensor(routing[0], "router_logits", torch.float32, [tokens, columns], hidden.device)
        if p is not None and p.routing_bias != (routing_bias is not None):
            raise MoeError("invalid_argument",
                           f"routing_bias: the problem has routing_bias, so give the [{p.experts}] "
                           f"f32 selection bias" if p.routing_bias else
                           "routing_bias: given, but the problem has no routing_bias")
        if routing_bias is not None:
            _check_tensor(routing_bias, "routing_bias", torch.float32, [p.experts if p else None],
                          hidden.device)
    elif len(routing) == 2:
        _check_tensor(routing[0], "topk_ids", torch.int32, [tokens, width], hidden.device)
        _check_tensor(routing[1], "topk_weights", torch.float32, [tokens, width], hidden.device)
        if routing_bias is not None:
            raise MoeError("invalid_argument",
                           "routing_bias: only with router logits; (topk_ids, topk_weights) are "
                           "routed already")
    else:
        raise MoeError("invalid_argument",
                       f"routing: expected [router_logits] or (topk_ids, topk_weights), got "
                       f"{len(routing)} tensors")


def _workspace(nbytes, device):
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


@torch.library.custom_op("moe_registry::moe_layer", mutates_args=())
def _moe_layer(hidden: torch.Tensor, routing: List[torch.Tensor], layer: int,
               routing_bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    moe = _layer_of(layer)
    _check(hidden, routing, moe, routing_bias)
    tokens, p = hidden.shape[0], moe.problem
    if len(routing) == 1:
        width = (tokens, p.top_k + p.sink_experts)
        ids = torch.empty(width, dtype=torch.int32, device=hidden.device)
        weights = torch.empty(width, dtype=torch.float32, device=hidden.device)
        moe.route(routing[0], bias=routing_bias, topk_ids=ids, topk_weights=weights,
                  workspace=_workspace(moe.route_workspace_size(tokens), hidden.device))
    else:
        ids, weights = routing
    out = torch.empty_like(hidden)
    moe.run(hidden, ids, weights, out=out,
            workspace=_workspace(moe.workspace_size(tokens), hidden.device))
    return out


@_moe_layer.register_fake
def _moe_layer_fake(hidden, routing, layer, routing_bias=None):
    _check(hidden, routing, _layer_of(layer) if isinstance(layer, int) else None, routing_bias)
    return torch.empty_like(hidden)
