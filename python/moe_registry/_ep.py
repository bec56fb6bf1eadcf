"""ExpertParallelGroup: expert parallelism over an NCCL communicator the engine already owns
(vLLM's PyNcclCommunicator, a torch.distributed backend's), borrowed, never destroyed here:

    group = moe.ExpertParallelGroup(pynccl.comm.value, layer)   # every rank at the same point
    out = group.step(layer, hidden, (topk_ids, topk_weights))    # host arrays in and out
    group.close()                                                # the communicator stays yours

Each rank prepares `layer` with its EP problem (ep_placement, ep_size, ep_rank = its rank) and its
experts' weights; the communicator's rank and size must be those. A step sends each token to the
ranks that own its experts and sums what comes back (docs/design.md §4, README "Expert
parallelism"). ExpertParallelGroup.single_rank() runs the same step for ep_size 1 without NCCL."""

import ctypes

from . import _core, _tensors
from ._errors import MoeError


class ExpertParallelGroup:
    def __init__(self, nccl_comm, layer, *, timeout_s=120.0):
        """`nccl_comm`: the address of an initialised ncclComm_t as an int, or a ctypes.c_void_p
        holding it (vLLM: ``PyNcclCommunicator(...).comm``). It must outlive the group and come
        from the NCCL library this process loads ($MOE_NCCL_LIBRARY, else libnccl.so.2).
        `layer`: this rank's Layer, from a device-memory plugin. `timeout_s`: each exchange's
        deadline. A collective: every rank of the communicator makes its group together."""
        self._native = _core.EpGroup(_address(nccl_comm), _native_layer(layer), float(timeout_s))

    @classmethod
    def single_rank(cls):
        """One rank (ep_size 1), no communicator and no NCCL: any plugin, host ones too."""
        group = cls.__new__(cls)
        group._native = _core.EpGroup()
        return group

    @property
    def rank(self):
        return self._native.rank

    @property
    def world_size(self):
        return self._native.world

    def step(self, layer, hidden, routing, *, out=None):
        """hidden [T, H] bf16 (this rank's tokens, host memory) with routing = (topk_ids [T, k + S]
        int32 of global expert ids, topk_weights f32) -> out [T, H] bf16, made like hidden if not
        given. A collective: every rank steps its layer of the same problem, in the same order."""
        if not (isinstance(routing, (tuple, list)) and len(routing) == 2
                and not _tensors.is_tagged(routing)):
            raise MoeError("invalid_argument",
                           "routing: a step takes (topk_ids, topk_weights); route the logits "
                           "first (layer.route, in the layer's memory)")
        topk_ids, topk_weights = routing
        tokens = _tensors.leading_dim(hidden, "hidden")
        hidden = _tensors.detached(hidden)
        if out is None:
            out = _tensors.empty_like(hidden, (tokens, layer.problem.hidden), None, "out")
        self._native.step(_native_layer(layer), hidden, _tensors.detached(topk_ids),
                          _tensors.detached(topk_weights), _tensors.detached(out))
        return _tensors.untagged(out)

    def device_step(self, layer, max_tokens, *, ragged=False, chunks=1):
        """The step that stays on the device (docs/design.md §4, "Two EP steps"): buffers for
        `max_tokens` tokens a rank made now in `layer`'s memory; DeviceStep.run enqueues a step on
        a stream with no host work in between. A shared expert split off at prepare and sink
        experts run on each rank's own tokens after the exchange, added into the output (the
        plugin must declare accumulate, ABI 1.4); every rank the same batch size, unless
        `ragged` (every rank's rows padded to max_tokens on the device for the exchanges; every
        rank must pass the same). `chunks` > 1 (at most max_tokens and 64; the same on every rank):
        each rank's rows cut into that many chunks, whose exchanges run on a stream of the step's
        own and overlap the other chunks' layer runs."""
        return DeviceStep(self, layer, max_tokens, ragged, chunks)

    def close(self):
        """Lets go of the communicator now (it is never destroyed here: it stays the caller's).
        Close the group's device steps first."""
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class DeviceStep:
    """ExpertParallelGroup.device_step's: one rank's expert-parallel step on tensors in the
    layer's memory (CUDA tensors for a device backend), enqueued on a stream."""

    def __init__(self, group, layer, max_tokens, ragged=False, chunks=1):
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise MoeError("invalid_argument",
                           f"max_tokens: expected an int, got {type(max_tokens).__name__}")
        if not isinstance(ragged, bool):
            raise MoeError("invalid_argument",
                           f"ragged: expected a bool, got {type(ragged).__name__}")
        if isinstance(chunks, bool) or not isinstance(chunks, int):
            raise MoeError("invalid_argument",
                           f"chunks: expected an int, got {type(chunks).__name__}")
        if chunks < 1:  # (the C API reads 0 as one chunk, for callers older than the field)
            raise MoeError("invalid_argument", f"chunks must be at least 1, not {chunks}")
        self._hidden = layer.problem.hidden
        self.ragged = ragged
        self.chunks = chunks
        self._native = _core.EpDeviceStep(group._native, _native_layer(layer), max_tokens,
                                          ragged, chunks)

    def run(self, hidden, routing, *, out=None, stream=None):
        """hidden [T, H] bf16 with routing = (topk_ids [T, k] int32 global ids, topk_weights f32),
        all in the layer's memory -> out [T, H] bf16 (made like hidden if not given), written
        when `stream` (default: the current one) gets there. A collective: every rank runs its
        step in the same order, with the same T unless the step is ragged."""
        if not (isinstance(routing, (tuple, list)) and len(routing) == 2
                and not _tensors.is_tagged(routing)):
            raise MoeError("invalid_argument", "routing: a step takes (topk_ids, topk_weights)")
        topk_ids, topk_weights = routing
        tokens = _tensors.leading_dim(hidden, "hidden")
        hidden = _tensors.detached(hidden)
        handle = _tensors.stream_arg(stream, hidden)
        if out is None:
            out = _tensors.empty_like(hidden, (tokens, self._hidden), None, "out", handle)
        self._native.run(hidden, _tensors.detached(topk_ids), _tensors.detached(topk_weights),
                         _tensors.detached(out), handle, stream_is_current=stream is None)
        return _tensors.untagged(out)

    def close(self):
        """Frees the step's buffers now (later runs are errors)."""
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _native_layer(layer):
    from ._layer import Layer
    if not isinstance(layer, Layer):
        raise MoeError("invalid_argument",
                       f"layer: expected a moe_registry.Layer, got {type(layer).__name__}")
    return layer._native


def _address(nccl_comm):
    """The ncclComm_t's address: an int, or a ctypes pointer's value (None is NULL)."""
    if isinstance(nccl_comm, ctypes.c_void_p):
        nccl_comm = nccl_comm.value or 0
    if isinstance(nccl_comm, bool) or not isinstance(nccl_comm, int):
        raise MoeError("invalid_argument",
                       f"nccl_comm: expected the communicator's address as an int or a "
                       f"ctypes.c_void_p (vLLM: PyNcclCommunicator.comm), got "
                       f"{type(nccl_comm).__name__}")
    if nccl_comm < 0 or nccl_comm >= 1 << 64:
        raise MoeError("invalid_argument", f"nccl_comm: {nccl_comm} is not an address")
    return nccl_comm
