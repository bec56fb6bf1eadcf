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
        """Prepares canonical weights (docs/design.md §3) with `backend`: a plugin name or
        alias, or "auto" (the default) = the supporting plugin of highest priority. `problem` is a
        Problem, a dict of its keys, or a Selection (then its backend, problem and options are used
        unless given). `weights` maps moe_weights field names ("w13", "w2", "w13_scale", ...) to
        arrays, all in host memory or all on one CUDA device (torch or CuPy tensors an engine
        loaded there: they are copied to the host on their device's current stream, then prepared
        as host weights; a GPU plugin needs them on the current device). `options` maps strings to
        strings (a config's `options:`)."""
        from ._registry import default_registry
        registry = registry or default_registry()
        return registry.prepare(problem, weights, backend, options=options, stream=stream)

    @staticmethod
    def from_checkpoint(config, backend=None, *, registry=None, stream=None):
        """One layer of a config's ``checkpoint:`` (a path, YAML text or dict; its path relative
        to the current directory, as `moe run` reads it), loaded through the checkpoint adapters
        and prepared with `backend` (a name, alias or "auto"; None = the config's `backend:` and
        `fallback:`, as `moe select` chooses). The checkpoint's router comes with the layer:
        ``router_tensors()``, ``router_dtype``, ``real_experts``."""
        from ._registry import default_registry
        registry = registry or default_registry()
        return registry.prepare_checkpoint(config, backend, stream=stream)

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

    @property
    def weights_from(self):
        """"checkpoint PATH (CONVENTION)[; converted at load: ...]", or "weights"."""
        return self._native.weights_from

    @property
    def router_dtype(self):
        """The precision of the checkpoint's router GEMM, "bf16" or "fp32" ("" without one)."""
        return self._native.router_dtype

    @property
    def real_experts(self):
        """The checkpoint's experts (problem.experts may be padded for EP); 0 without one."""
        return self._native.real_experts

    def router_tensors(self):
        """The checkpoint's router as host NumPy arrays, those it has of "router_weight"
        [E_real + S, H] (bf16 as (uint16 array, "bf16"), or f32), "router_bias" [E_real + S] f32
        (added to the GEMM's sums) and "routing_bias" [E] f32 (route's bias=); {} for a layer
        prepared from weights."""
        import numpy
        out = {}
        for name, (data, dtype, shape) in self._native.router_tensors().items():
            array = numpy.frombuffer(data, numpy.uint16 if dtype == "bf16" else numpy.float32)
            array = array.reshape(shape)
            out[name] = (array, "bf16") if dtype == "bf16" else array
        return out

    def workspace_size(self, tokens):
        """Bytes of workspace a run of `tokens` takes (the layer keeps its own)."""
        return self._native.workspace_size(_tensors.count_arg(tokens, "tokens"))

    def route_workspace_size(self, tokens):
        """Bytes of workspace routing `tokens` takes."""
        return self._native.route_workspace_size(_tensors.count_arg(tokens, "tokens"))

    def route(self, logits, *, bias=None, is_padding=None, topk_ids=None, topk_weights=None,
              workspace=None, stream=None):
        """Router logits [T, E + S] f32 -> (topk_ids [T, k + S] int32, topk_weights f32).
        `workspace`: a 1-D uint8 array of at least route_workspace_size(T) bytes in the layer's
        memory; None = the layer's own."""
        tokens = self._tokens(logits, "logits")
        logits = _tensors.detached(logits)
        handle = _stream(stream, logits)
        topk_ids, topk_weights = self._topk_outputs(logits, tokens, topk_ids, topk_weights, handle)
        self._native.route(logits, _tensors.detached(topk_ids), _tensors.detached(topk_weights),
                           _maybe_detached(bias), _maybe_detached(is_padding),
                           _maybe_detached(workspace), handle, stream_is_current=stream is None)
        return topk_ids, topk_weights

    def run(self, hidden, topk_ids, topk_weights, *, out=None, workspace=None, stream=None):
        """hidden [T, H] bf16 with its routing -> out [T, H] bf16 (made like hidden if not given).
        `workspace`: a 1-D uint8 array of at least workspace_size(T) bytes in the layer's memory
        (then the call allocates nothing); None = the layer's own, kept and grown."""
        return self._run(hidden, topk_ids, topk_weights, out, workspace, stream)

    def run_routed(self, hidden, router_logits, *, bias=None, is_padding=None, topk_ids=None,
                   topk_weights=None, out=None, workspace=None, stream=None):
        """hidden [T, H] bf16 and its router logits [T, E + S] f32 -> (out [T, H] bf16, topk_ids
        [T, k + S] int32, topk_weights f32) in one call: the plugin routes the batch itself
        (ABI 1.6; `bias` and `is_padding` as route() takes them), which a GPU plugin may do inside
        the layer's own launch; UNSUPPORTED where it does not route the problem in run (route(),
        then run()). Outputs not given are made like hidden's; `workspace` as run()'s."""
        if router_logits is None:
            raise MoeError("invalid_argument",
                           "router_logits: run_routed routes from them; run() takes a routing")
        tokens = self._tokens(hidden, "hidden")
        topk_ids, topk_weights = self._topk_outputs(hidden, tokens, topk_ids, topk_weights,
                                                    _stream(stream, hidden))
        out = self._run(hidden, topk_ids, topk_weights, out, workspace, stream,
                        routing=(router_logits, bias, is_padding))
        return out, topk_ids, topk_weights

    def _tokens(self, x, name):
        """x's token count, refused above max_tokens before any output is made for it (for a
        [T, *] x: another rank is the native call's to name)."""
        tokens = _tensors.leading_dim(x, name)
        if len(_tensors.untagged(x).shape) == 2 and tokens > self._problem.max_tokens:
            raise MoeError("capacity_exceeded",
                           f"{name}: {tokens} tokens is more than the layer's "
                           f"max_tokens={self._problem.max_tokens}")
        return tokens

    def _topk_outputs(self, like, tokens, topk_ids, topk_weights, stream):
        """route() and run_routed(): the routing's outputs [T, k + S], made like `like` where not
        given (the binding refuses read-only ones), from the pool of `stream` (the call's)."""
        width = self._problem.top_k + self._problem.sink_experts
        if topk_ids is None:
            topk_ids = _tensors.empty_like(like, (tokens, width), "int32", "topk_ids", stream)
        if topk_weights is None:
            topk_weights = _tensors.empty_like(like, (tokens, width), "float32", "topk_weights",
                                               stream)
        return topk_ids, topk_weights

    def _run(self, hidden, topk_ids, topk_weights, out, workspace, stream, routing=None):
        """run() and run_routed(): `routing` = (router_logits, bias, is_padding) or None."""
        tokens = self._tokens(hidden, "hidden")
        hidden = _tensors.detached(hidden)
        handle = _stream(stream, hidden)
        if out is None:
            out = _tensors.empty_like(hidden, (tokens, self._problem.hidden), None, "out", handle)
        logits, bias, is_padding = routing or (None, None, None)
        self._native.run(hidden, _tensors.detached(topk_ids), _tensors.detached(topk_weights),
                         _tensors.detached(out), _maybe_detached(workspace), handle,
                         _maybe_detached(logits), _maybe_detached(bias),
                         _maybe_detached(is_padding), stream_is_current=stream is None)
        return _tensors.untagged(out)

    def __call__(self, hidden, routing=None, *, topk_ids=None, topk_weights=None, bias=None,
                 out=None, stream=None):
        """Routes `routing` (router logits) then runs; or runs a given (topk_ids, topk_weights).
        With router logits, topk_ids= and topk_weights= (if given) receive the routing."""
        routes = False  # whether `routing` is router logits that route() takes (with `bias`)
        if isinstance(routing, (tuple, list)) and not _tensors.is_tagged(routing):
            if len(routing) != 2:
                raise MoeError("invalid_argument",
                               f"routing: a tuple must be (topk_ids, topk_weights), got {len(routing)} items")
            if topk_ids is not None or topk_weights is not None:
                raise MoeError("invalid_argument",
                               "routing: (topk_ids, topk_weights) given twice, as the tuple and as "
                               "topk_ids= / topk_weights=; give one")
            topk_ids, topk_weights = routing
        elif routing is not None:
            # (a hidden of the wrong rank is run()'s to name)
            shape = getattr(_tensors.untagged(hidden), "shape", None)
            tokens = int(shape[0]) if shape is not None and len(shape) == 2 else None
            rows = _tensors.leading_dim(routing, "routing")
            if tokens is not None and rows != tokens:
                raise MoeError("shape_mismatch",
                               f"routing: the router logits have {rows} rows, but hidden has "
                               f"{tokens} tokens (one row of logits a token)")
            # topk_ids= / topk_weights= given with router logits: where the routing goes
            topk_ids, topk_weights = self.route(routing, bias=bias, topk_ids=topk_ids,
                                                topk_weights=topk_weights, stream=stream)
            routes = True
        if topk_ids is None or topk_weights is None:
            raise MoeError("invalid_argument",
                           "routing: give router logits, (topk_ids, topk_weights), or both of "
                           "topk_ids= and topk_weights=")
        if bias is not None and not routes:
            raise MoeError("invalid_argument",
                           "bias: the selection bias of routing, but no router logits were given "
                           "to route (the routing is the given topk_ids and topk_weights)")
        return self.run(hidden, topk_ids, topk_weights, out=out, stream=stream)

    def __repr__(self):
        return f"Layer(backend={self.backend!r}, memory={self.memory!r}, problem={self.problem!r})"


def _maybe_detached(x):
    return None if x is None else _tensors.detached(x)


def _stream(stream, like):
    return _tensors.stream_arg(stream, like)
