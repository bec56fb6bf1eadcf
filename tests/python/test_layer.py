"""A layer prepared by the reference plugin, run from Python, against the NumPy layer of
numpy_moe.py and against itself through each way of passing routing and tensors."""

import ml_dtypes
import numpy as np
import pytest

import moe_registry as moe
from fake_dlpack import KDL_CPU, FakeDeviceArray
import numpy_moe
from conftest import HIDDEN, TOKENS, TOP_K


def test_routing_matches_numpy(layer, batch):
    _, logits = batch
    ids, weights = layer.route(logits)
    want_ids, want_weights = numpy_moe.softmax_topk(logits, TOP_K, renormalize=True)
    assert ids.dtype == np.int32 and weights.dtype == np.float32
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-6)


def test_output_matches_numpy(layer, weights, batch):
    hidden, logits = batch
    out = layer(hidden, logits)
    assert out.dtype == ml_dtypes.bfloat16 and out.shape == (TOKENS, HIDDEN)
    ids, w = numpy_moe.softmax_topk(logits, TOP_K, renormalize=True)
    want = numpy_moe.layer(hidden, weights["w13"], weights["w2"], ids, w)
    assert np.any(out.astype(np.float32) != 0)
    # Both sum in double and round once: only a sum within an ulp of a bf16 midpoint may differ.
    assert np.mean(out.view(np.uint16) != want.view(np.uint16)) <= 0.01
    assert numpy_moe.rel_l2(out, want) < 1e-3


def test_given_routing_gives_the_output_of_logits(layer, batch):
    hidden, logits = batch
    routed = layer(hidden, logits)
    ids, weights = layer.route(logits)
    for out in (layer(hidden, (ids, weights)), layer(hidden, topk_ids=ids, topk_weights=weights),
                layer.run(hidden, ids, weights)):
        np.testing.assert_array_equal(out.view(np.uint16), routed.view(np.uint16))


def test_raw_bf16_bits_and_an_out_buffer(layer, batch):
    hidden, logits = batch
    want = layer(hidden, logits).view(np.uint16)
    bits = (hidden.view(np.uint16), "bf16")
    np.testing.assert_array_equal(layer(bits, logits), want)
    buffer = np.zeros((TOKENS, HIDDEN), ml_dtypes.bfloat16)
    assert layer(hidden, logits, out=buffer) is buffer
    np.testing.assert_array_equal(buffer.view(np.uint16), want)


def test_an_empty_batch_gives_an_empty_output(layer):
    out = layer(np.zeros((0, HIDDEN), ml_dtypes.bfloat16), np.zeros((0, 4), np.float32))
    assert out.shape == (0, HIDDEN)


def test_an_empty_batch_without_storage_still_routes(problem, weights):
    """torch's and CuPy's empty arrays have a NULL data pointer, which the ABI reads as "no
    router_logits" (and then a routing bias beside them as an error): the binding points empty
    arrays somewhere that is never read."""
    layer = moe.Layer.prepare(problem.replace(routing_bias=True), weights, backend="reference")
    empty = lambda shape, dtype: FakeDeviceArray(np.zeros(shape, dtype), device_type=KDL_CPU,
                                                 null_data=True)
    out, ids, w = layer.run_routed(
        empty((0, HIDDEN), ml_dtypes.bfloat16), empty((0, 4), np.float32),
        bias=np.zeros(4, np.float32), topk_ids=np.zeros((0, 2), np.int32),
        topk_weights=np.zeros((0, 2), np.float32), out=np.zeros((0, HIDDEN), ml_dtypes.bfloat16))
    assert out.shape == (0, HIDDEN) and ids.shape == (0, 2)


@pytest.mark.parametrize("stream, exported_on", [(0, 1), (0x7F00, 0x7F00)])
def test_a_cuda_array_is_exported_on_the_calls_stream(layer, batch, stream, exported_on):
    """DLPack's stream handshake: the binding asks a CUDA array's exporter for it on the call's
    stream (DLPack numbers the legacy default stream 1), so that the producer orders its work
    before that stream and syncs no other (inside a graph capture, another one breaks it); an
    array written asks for DLPack 1.0 too (its read-only bit). Host arrays name no stream. The
    layer here is host memory, so each call ends refusing the device array it was given."""
    hidden, logits = batch
    ids, weights = layer.route(logits)
    device_hidden = FakeDeviceArray(hidden)
    with pytest.raises(moe.MoeError, match="hidden"):
        layer.run(device_hidden, ids, weights, out=np.zeros_like(hidden), stream=stream)
    assert device_hidden.dlpack_calls[0] == {"stream": exported_on}
    device_ids = FakeDeviceArray(np.zeros(ids.shape, np.int32))
    with pytest.raises(moe.MoeError, match="topk_ids"):
        layer.route(logits, topk_ids=device_ids, stream=stream)
    assert device_ids.dlpack_calls[0] == {"stream": exported_on, "max_version": (1, 0)}
    host_hidden = FakeDeviceArray(hidden, device_type=KDL_CPU)
    layer.run(host_hidden, ids, weights, out=np.zeros_like(hidden), stream=stream)
    assert all("stream" not in call for call in host_hidden.dlpack_calls)


def test_a_cuda_array_on_the_current_stream_asks_for_no_synchronisation(layer, batch):
    """Without `stream=` a call runs on the stream the caller's framework has current, which
    already orders the array's producer: DLPack's -1 (no synchronisation; torch would otherwise
    record and wait on an event for every array)."""
    hidden, logits = batch
    ids, weights = layer.route(logits)
    device_hidden = FakeDeviceArray(hidden)
    with pytest.raises(moe.MoeError, match="hidden"):
        layer.run(device_hidden, ids, weights, out=np.zeros_like(hidden))
    assert device_hidden.dlpack_calls[0] == {"stream": -1}


def test_a_byte_swapped_bfloat16_array_is_refused(layer, batch):
    hidden, logits = batch
    swapped = hidden.astype(hidden.dtype.newbyteorder(">"))
    with pytest.raises(moe.MoeError, match="hidden: .*cannot be read through DLPack") as error:
        layer(swapped, logits)
    assert error.value.status == "dtype_mismatch"


def test_prepares_from_a_selection(weights, batch):
    sel = moe.select({"backend": "reference", "problem": {
        "experts": 4, "top_k": 2, "hidden": 64, "intermediate": 32, "renormalize": True,
        "max_tokens": 16}})
    layer = moe.Layer.prepare(sel, weights)
    assert layer.backend == "reference" and layer.router == "reference"
    assert layer.memory == "host" and layer.problem == sel.problem
    hidden, logits = batch
    assert layer.workspace_size(TOKENS) >= 0
    assert layer(hidden, logits).shape == (TOKENS, HIDDEN)


def test_auto_prepares_with_a_plugin_that_supports_the_problem(problem, weights, batch):
    layer = moe.Layer.prepare(problem, weights)  # backend "auto"
    assert layer.backend in [p.name for p in moe.list()]
    hidden, logits = batch
    ref = moe.Layer.prepare(problem, weights, backend="reference")
    assert numpy_moe.rel_l2(layer(hidden, logits), ref(hidden, logits)) < 1e-2


def test_torch_tensors_in_give_torch_tensors_out(problem, weights, batch):
    torch = pytest.importorskip("torch", reason="torch is not installed (NumPy covers CI)")
    layer = moe.Layer.prepare(problem, {k: torch.from_numpy(v.view(np.uint16)).view(torch.bfloat16)
                                        for k, v in weights.items()}, backend="reference")
    hidden, logits = batch
    out = layer(torch.from_numpy(hidden.view(np.uint16)).view(torch.bfloat16),
                torch.from_numpy(logits))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    want = layer(hidden, logits).view(np.uint16)
    np.testing.assert_array_equal(out.view(torch.int16).numpy().view(np.uint16), want)


def test_run_routed_routes_in_the_call_from_router_logits(layer, batch):
    """ABI 1.6: run_routed() routes the batch in the same call (the reference plugin does): the
    ids, weights and output bits of route() then run(), into given buffers or its own."""
    hidden, logits = batch
    ids, weights = layer.route(logits)
    want = layer.run(hidden, ids, weights)
    got_ids = np.full_like(ids, -7)
    got_weights = np.full_like(weights, np.nan)
    out, ids_out, weights_out = layer.run_routed(hidden, logits, topk_ids=got_ids,
                                                 topk_weights=got_weights)
    assert ids_out is got_ids and weights_out is got_weights
    np.testing.assert_array_equal(got_ids, ids)
    np.testing.assert_array_equal(got_weights.view(np.uint32), weights.view(np.uint32))
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    out, ids_out, weights_out = layer.run_routed(hidden, logits)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(ids_out, ids)
    with pytest.raises(moe.MoeError, match="router_logits"):
        layer.run_routed(hidden, logits[:-1])
    with pytest.raises(moe.MoeError, match="run_routed routes from them"):
        layer.run_routed(hidden, None)
    with pytest.raises(moe.MoeError, match="no routing_bias"):
        layer.run_routed(hidden, logits, bias=np.zeros(logits.shape[1], np.float32))
