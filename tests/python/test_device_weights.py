"""Weights an engine keeps on a GPU, from Python without one: DLPack arrays that say they are on a
CUDA device (fake_dlpack.py) reach the C API as device weights, which says why it cannot copy
them here (no driver) or, on a GPU machine, that the memory is not the device's, never reading
it; and the binding refuses, naming the argument, weights in two places, on two devices, of a
dtype the ABI lacks, or as a non-contiguous view. The real copies run in
test_device_weights_gpu.py."""

import numpy as np
import pytest

import moe_registry as moe
from conftest import HIDDEN, INTERMEDIATE
from fake_dlpack import KDL_ROCM, FakeDeviceArray
from test_bad_input import raises


def on_cuda(weights, device_id=0):
    return {k: FakeDeviceArray(v, device_id) for k, v in weights.items()}


def test_device_weights_reach_the_core_which_asks_the_driver_before_reading(problem, weights):
    with pytest.raises(moe.MoeError) as e:
        moe.Layer.prepare(problem, on_cuda(weights), backend="reference")
    err = e.value
    # No driver (CI) or no GPU: the reason, in the weights' terms. A GPU: the driver says the
    # pointer is no device memory of cuda:0.
    assert err.status in ("not_found", "device_error", "invalid_argument"), err
    assert "weights" in err.message, err.message
    if err.status == "invalid_argument":
        assert "weights.w13" in err.message and "cuda:0" in err.message, err.message
    else:
        assert "weights in CUDA device memory" in err.message, err.message


def test_weights_in_two_places_are_refused_naming_both(problem, weights):
    mixed = {"w13": FakeDeviceArray(weights["w13"]), "w2": weights["w2"]}
    with raises("invalid_argument", "weights['w2']: on cpu, but weights['w13'] is on cuda:0"):
        moe.Layer.prepare(problem, mixed, backend="reference")
    two_gpus = {"w13": FakeDeviceArray(weights["w13"], 0), "w2": FakeDeviceArray(weights["w2"], 1)}
    with raises("invalid_argument", "weights['w2']: on cuda:1, but weights['w13'] is on cuda:0"):
        moe.Layer.prepare(problem, two_gpus, backend="reference")
    host_first = {"w2": weights["w2"], "w13": FakeDeviceArray(weights["w13"])}
    with raises("invalid_argument", "weights['w13']: on cuda:0, but weights['w2'] is on cpu"):
        moe.Layer.prepare(problem, host_first, backend="reference")


def test_device_weights_are_checked_like_host_ones(problem, weights):
    w13 = weights["w13"]
    every_other_column = FakeDeviceArray(
        w13, shape=(w13.shape[0], w13.shape[1], HIDDEN // 2),
        strides=(w13.shape[1] * HIDDEN, HIDDEN, 2))
    with raises("invalid_argument", "weights['w13']: a non-contiguous view",
                "strides (4096, 64, 2)"):
        moe.Layer.prepare(problem, {**on_cuda(weights), "w13": every_other_column},
                          backend="reference")
    complex_w2 = FakeDeviceArray(np.zeros((4, HIDDEN, INTERMEDIATE), np.complex64))
    with raises("dtype_mismatch", "weights['w2']: dtype complex64 has no moe_dtype"):
        moe.Layer.prepare(problem, {**on_cuda(weights), "w2": complex_w2}, backend="reference")
    rocm = {k: FakeDeviceArray(v, device_type=KDL_ROCM) for k, v in weights.items()}
    with raises("invalid_argument", "weights['w13']: on DLPack device type 10:0",
                "host or CUDA device memory"):
        moe.Layer.prepare(problem, rocm, backend="reference")


def test_host_weights_still_prepare_as_before(problem, weights, batch):
    hidden, logits = batch
    a = moe.Layer.prepare(problem, weights, backend="reference")
    b = moe.Layer.prepare(problem, {k: (v.view(np.uint16), "bf16") for k, v in weights.items()},
                          backend="reference")
    np.testing.assert_array_equal(a(hidden, logits).view(np.uint16),
                                  b(hidden, logits).view(np.uint16))
