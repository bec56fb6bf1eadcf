"""Layer: one MoE layer prepared by a plugin (moe_host_layer). Call it with the hidden states and
the router logits, or with routing already done:

    out = layer(hidden, logits)                  # route (plugin or reference), then run
    out = layer(hidden, (topk_ids, topk_weights))
    ids, weights = layer.route(logits)
    out = layer.run(hidden, ids, weights, out=buffer)

Tensors live in the layer's memory (``layer.memory``: "host" or "cuda_device") and are NumPy,
torch or CuPy arrays, or (array, "bf16") for raw bits; outputs come back in the input's kind."""

from . import _tensors
from ._errors import MoeError
from ._problem import Problem


class Layer:
    def __init__(self, native):
        self._native = native
        self._problem = Problem._from_native(native.problem)

    @staticmethod
    def prepare(problem, weights, backend=None, *, options=None, registry=None, stream=None):
        """Prepares canonical weights (host memory; docs/design.md §3) with `backend`: a plugin
        name or alias, or "auto" (the default) = the supporting plugin of highest priority.
        `problem` is a Problem, a dict of its keys, or a Selection (then its backend, problem and
        options are used unless given). `weights` maps moe_weights field names ("w13", "w2",
        "w13_scale", ...) to arrays; `options` maps strings to strings (a config's `options:`)."""
        from ._registry import default_registry
        registry = registry or default_registry()
        return registry.prepare(problem, weights, backend, options=options, stream=stream)

    @property
    def backend(self):
        """The plugin that prepared the layer."""
        return self._native.backend

    @property
    def router(self):
        """The plugin that routes for the layer ("" when none can in its memory)."""
        return self._native.router

    @property
    def problem(self):
        """The layer's problem, normalised."""
        return self._problem

    @property
    def memory(self):
        return self._native.memory

    def workspace_size(self, tokens):
        """Bytes of workspace a run of `tokens` takes (the layer keeps its own)."""
        return self._native.workspace_size(tokens)

    def route(self, logits, *, bias=None, is_padding=None, topk_ids=None, topk_weights=None,
              stream=None):
        """Router logits [T, E + S] f32 -> (topk_ids [T, k + S] int32, topk_weights f32)."""
        width = self._problem.top_k + self._problem.sink_experts
        tokens = _tensors.leading_dim(logits, "logits")
        logits = _tensors.detached(logits)
        if topk_ids is None:
            topk_ids = _tensors.empty_like(logits, (tokens, width), "int32", "topk_ids")
        if topk_weights is None:
            topk_weights = _tensors.empty_like(logits, (tokens, width), "float32", "topk_weights")
        _tensors.check_writable(topk_ids, "topk_ids")
        _tensors.check_writable(topk_weights, "topk_weights")
        self._native.route(logits, topk_ids, topk_weights, _maybe_detached(bias),
                           _maybe_detached(is_padding), _stream(stream, logits))
        return topk_ids, topk_weights

    def run(self, hidden, topk_ids, topk_weights, *, out=None, stream=None):
        """hidden [T, H] bf16 with its routing -> out [T, H] bf16 (made like hidden if not given)."""
        tokens = _tensors.leading_dim(hidden, "hidden")
        hidden = _tensors.detached(hidden)
        if out is None:
            out = _tensors.empty_like(hidden, (tokens, self._problem.hidden), None, "out")
        _tensors.check_writable(out, "out")
        self._native.run(hidden, _tensors.detached(topk_ids), _tensors.detached(topk_weights), out,
                         _stream(stream, hidden))
        return _tensors.untagged(out)

    def __call__(self, hidden, routing=None, *, topk_ids=None, topk_weights=None, bias=None,
                 out=None, stream=None):
        """Routes `routing` (router logits) then runs; or runs a given (topk_ids, topk_weights)."""
        if isinstance(routing, (tuple, list)) and not _tensors.is_tagged(routing):
            if len(routing) != 2:
                raise MoeError("invalid_argument",
                               f"routing: a tuple must be (topk_ids, topk_weights), got {len(routing)} items")
            topk_ids, topk_weights = routing
        elif routing is not None:
            topk_ids, topk_weights = self.route(routing, bias=bias, stream=stream)
        if topk_ids is None or topk_weights is None:
            raise MoeError("invalid_argument",
                           "routing: give router logits, (topk_ids, topk_weights), or both of "
                           "topk_ids= and topk_weights=")
        return self.run(hidden, topk_ids, topk_weights, out=out, stream=stream)

    def __repr__(self):
        return f"Layer(backend={self.backend!r}, memory={self.memory!r}, problem={self.problem!r})"


def _maybe_detached(x):
    return None if x is None else _tensors.detached(x)


def _stream(stream, like):
    return int(stream) if stream is not None else _tensors.current_stream(like)
