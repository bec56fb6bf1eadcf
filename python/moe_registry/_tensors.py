"""Outputs and streams for the array types a layer takes. An output is made like the input it
follows (same framework and device: torch in, torch out; NumPy in, NumPy out), and a call runs on
the caller's current stream (torch's or CuPy's) unless given one. The binding checks every array
(dtype, shape, contiguity, device) and names the argument; here only what it cannot do is done."""

import sys

from ._errors import MoeError


def _framework(x):
    module = type(x).__module__.split(".")[0]
    return module if module in ("torch", "numpy", "cupy") else None


def untagged(x):
    """The array of an argument given as (array, "dtype name"), else the argument."""
    return x[0] if is_tagged(x) else x


def is_tagged(x):
    return isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], str)


def detached(x):
    """torch tensors that require grad refuse DLPack export: the layer is inference only."""
    if is_tagged(x):
        return (detached(x[0]), x[1])
    return x.detach() if _framework(x) == "torch" else x


def leading_dim(x, name):
    """The token count of a [T, ...] argument (0 for a scalar), or a MoeError naming it."""
    shape = getattr(untagged(x), "shape", None)
    if shape is None:  # a bare DLPack capsule or exporter: its shape is not readable here
        raise MoeError("invalid_argument",
                       f"{name}: expected an array with a shape (NumPy, torch, CuPy, or another "
                       f"__dlpack__ exporter that has .shape), got {type(untagged(x)).__name__}")
    return int(shape[0]) if len(shape) else 0


def empty_like(x, shape, dtype=None, name="out", stream=None):
    """An uninitialised array of `shape` in x's framework and device; dtype None = x's own (a
    tagged x gives a tagged output), else "int32" or "float32". `stream`: the handle of the stream
    the call that fills it runs on (None: the current one). A torch or CuPy array is taken from
    that stream's pool, so once dropped its memory is handed out again only behind that stream's
    work, never to the current stream while the call may still write it."""
    if is_tagged(x):
        return (empty_like(x[0], shape, dtype, name, stream), x[1]) if dtype is None else \
            empty_like(x[0], shape, dtype, name, stream)
    fw = _framework(x)
    if fw == "torch":
        import torch
        dt = getattr(torch, dtype) if dtype else x.dtype
        if stream is None or not x.is_cuda or stream == current_stream(x):
            return x.new_empty(shape, dtype=dt)
        on = torch.cuda.default_stream(x.device) if stream == 0 else \
            torch.cuda.ExternalStream(stream, device=x.device)
        with torch.cuda.stream(on):
            return x.new_empty(shape, dtype=dt)
    if fw == "numpy":
        import numpy
        return numpy.empty(shape, dtype=dtype or x.dtype)
    if fw == "cupy":
        import cupy
        with x.device:
            if stream is None or stream == current_stream(x):
                return cupy.empty(shape, dtype=dtype or x.dtype)
            on = cupy.cuda.Stream.null if stream == 0 else cupy.cuda.ExternalStream(stream)
            with on:
                return cupy.empty(shape, dtype=dtype or x.dtype)
    raise MoeError("invalid_argument",
                   f"{name}: cannot make an output like a {type(x).__name__}; pass {name}=")


def stream_arg(stream, like):
    """A call's `stream`: None = the caller's current one for `like`'s device; else a CUDA
    stream handle as an int (0 = the default stream), or an object holding one (torch's
    `cuda_stream`, CuPy's `ptr`)."""
    if stream is None:
        return current_stream(like)
    handle = getattr(stream, "cuda_stream", getattr(stream, "ptr", stream))
    if isinstance(handle, bool) or not isinstance(handle, int) or not 0 <= handle < 2 ** 64:
        raise MoeError("invalid_argument",
                       f"stream: expected a CUDA stream handle (an int from 0 to 2**64 - 1, 0 = "
                       f"the default stream, or a torch / CuPy stream), got {stream!r}")
    return handle


def count_arg(value, name):
    """An int argument (`tokens`, ...) that must be an int, as a MoeError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MoeError("invalid_argument", f"{name}: expected an int, got {value!r}")
    return value


def current_stream(x=None):
    """The caller's current CUDA stream (torch's or CuPy's) for x's device, 0 = the default."""
    array = untagged(x) if x is not None else None
    fw = _framework(array) if array is not None else None
    if fw == "torch" and array.is_cuda:
        import torch
        return torch.cuda.current_stream(array.device).cuda_stream
    if fw == "cupy":
        import cupy
        with array.device:  # CuPy keeps a current stream per device
            return cupy.cuda.get_current_stream().ptr
    if array is None and "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
        return sys.modules["torch"].cuda.current_stream().cuda_stream
    return 0


def first_on_cuda(arrays):
    """The first torch or CuPy array on a CUDA device (tagged or not), else None."""
    for x in arrays:
        array = untagged(x)
        fw = _framework(array)
        if (fw == "torch" and array.is_cuda) or fw == "cupy":
            return x
    return None


def current_device():
    """The CUDA device the caller works on (torch's, else CuPy's), -1 when neither says."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.current_device()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        return cupy.cuda.runtime.getDevice()
    return -1
