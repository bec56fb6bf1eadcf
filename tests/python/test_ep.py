"""Expert parallelism from Python on the CPU: the communicator argument is checked (NULL, not an
address, a host-memory backend) before NCCL is touched, and a one-rank step (no NCCL) of a layer
of an EP problem gives the layer's own output. Over a real NCCL communicator:
test_ep_gpu.py."""

import ctypes

import ml_dtypes
import numpy as np
import pytest

import moe_registry as moe
from conftest import HIDDEN, INTERMEDIATE, TOKENS, bf16
from test_bad_input import raises


def skip_without_ep(call):
    """call(), or a skip where this libmoe_core was built without expert parallelism."""
    try:
        return call()
    except moe.MoeError as e:
        if "built without expert parallelism" in e.message:
            pytest.skip(e.message)
        raise


@pytest.fixture
def ep_layer(problem, weights):
    return moe.Layer.prepare(problem.replace(ep_placement="linear", ep_size=1, ep_rank=0), weights,
                             backend="reference")


def test_a_null_or_malformed_communicator_is_refused(ep_layer):
    with raises("invalid_argument", "nccl_comm is NULL"):
        moe.ExpertParallelGroup(0, ep_layer)
    with raises("invalid_argument", "nccl_comm is NULL"):
        moe.ExpertParallelGroup(ctypes.c_void_p(None), ep_layer)
    with raises("invalid_argument", "nccl_comm: expected the communicator's address", "str"):
        moe.ExpertParallelGroup("0x1234", ep_layer)
    with raises("invalid_argument", "nccl_comm: -8 is not an address"):
        moe.ExpertParallelGroup(-8, ep_layer)
    with raises("invalid_argument", "layer: expected a moe_registry.Layer"):
        moe.ExpertParallelGroup(1, "layer")


def test_a_host_memory_backend_is_refused_before_the_communicator_is_read(ep_layer):
    not_a_communicator = ctypes.create_string_buffer(64)  # never read: refused first
    with pytest.raises(moe.MoeError) as e:
        moe.ExpertParallelGroup(ctypes.addressof(not_a_communicator), ep_layer)
    assert e.value.status == "unsupported"
    assert ("'reference' keeps host memory" in e.value.message
            or "built without expert parallelism" in e.value.message), e.value.message


def test_a_one_rank_step_gives_the_layers_output(layer, ep_layer, batch):
    hidden, logits = batch
    ids, weights = layer.route(logits)
    group = moe.ExpertParallelGroup.single_rank()
    assert (group.rank, group.world_size) == (0, 1)
    out = skip_without_ep(lambda: group.step(ep_layer, hidden, (ids, weights)))
    assert out.dtype == ml_dtypes.bfloat16 and out.shape == (TOKENS, HIDDEN)
    want = layer(hidden, (ids, weights))
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    buffer = np.zeros((TOKENS, HIDDEN), ml_dtypes.bfloat16)
    assert group.step(ep_layer, hidden, (ids, weights), out=buffer) is buffer
    np.testing.assert_array_equal(buffer.view(np.uint16), out.view(np.uint16))


def test_step_arguments_are_checked(layer, ep_layer, batch):
    hidden, logits = batch
    ids, weights = layer.route(logits)
    group = moe.ExpertParallelGroup.single_rank()
    with raises("invalid_argument", "routing: a step takes (topk_ids, topk_weights)"):
        group.step(ep_layer, hidden, logits)
    with raises("shape_mismatch", "hidden: expected shape (*, 64), got (8, 65)"):
        group.step(ep_layer, np.zeros((TOKENS, HIDDEN + 1), ml_dtypes.bfloat16), (ids, weights))
    with raises("shape_mismatch", "topk_ids: expected shape (8, 2), got (7, 2)"):
        group.step(ep_layer, hidden, (ids[:7], weights))
    with raises("dtype_mismatch", "topk_weights: expected f32, got f64"):
        group.step(ep_layer, hidden, (ids, weights.astype(np.float64)))
    group.close()
    with raises("invalid_argument", "the expert-parallel group is closed"):
        group.step(ep_layer, hidden, (ids, weights))


def test_a_shared_expert_is_split_off_and_runs_once_per_token(problem, weights, batch):
    rng = np.random.default_rng(3)
    with_shared = dict(weights,
                       shared_w13=bf16(rng.uniform(-0.125, 0.125, (2 * INTERMEDIATE, HIDDEN))),
                       shared_w2=bf16(rng.uniform(-0.18, 0.18, (HIDDEN, INTERMEDIATE))))
    p = problem.replace(shared_intermediate=INTERMEDIATE)
    whole = moe.Layer.prepare(p, with_shared, backend="reference")
    routed_only = moe.Layer.prepare(problem, weights, backend="reference")
    ep = moe.Layer.prepare(p.replace(ep_placement="linear", ep_size=1, ep_rank=0), with_shared,
                           backend="reference")
    hidden, logits = batch
    ids, topk_weights = whole.route(logits)
    group = moe.ExpertParallelGroup.single_rank()
    out = skip_without_ep(lambda: group.step(ep, hidden, (ids, topk_weights)))

    def rel(a, b):
        a, b = a.astype(np.float64), b.astype(np.float64)
        return np.linalg.norm(a - b) / np.linalg.norm(b)

    # The two parts are summed once more in f32 and rounded: within bf16 noise of the whole layer,
    # and far from the routed experts alone (the shared expert is really in it).
    assert rel(out, whole(hidden, (ids, topk_weights))) < 1e-2
    assert rel(out, routed_only(hidden, (ids, topk_weights))) > 0.1
    with raises("unsupported", "split off from the routed experts", "moe_host_ep_step"):
        ep(hidden, (ids, topk_weights))


def test_a_one_rank_device_step_gives_the_layers_output(layer, ep_layer, batch):
    """The step that stays on the device, one rank, on the reference's memory (host memory):
    the layer's bytes; a batch past max_tokens, a closed step and closing its group first are
    refused by name."""
    hidden, logits = batch
    ids, weights = layer.route(logits)
    group = moe.ExpertParallelGroup.single_rank()
    step = skip_without_ep(lambda: group.device_step(ep_layer, TOKENS))
    out = step.run(hidden, (ids, weights))
    want = layer(hidden, (ids, weights))
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    with raises("invalid_argument", "open device step", "close them first"):
        group.close()
    small = group.device_step(ep_layer, TOKENS - 1)
    with raises("capacity_exceeded", f"up to {TOKENS - 1} tokens a rank", f"not {TOKENS}"):
        small.run(hidden, (ids, weights))
    small.close()
    ragged = group.device_step(ep_layer, TOKENS, ragged=True)
    assert ragged.ragged
    out = ragged.run(hidden, (ids, weights))
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    ragged.close()
    with raises("invalid_argument", "ragged: expected a bool, got int"):
        group.device_step(ep_layer, TOKENS, ragged=1)
    chunked = group.device_step(ep_layer, TOKENS, chunks=3)  # one rank: nothing to overlap
    assert chunked.chunks == 3
    out = chunked.run(hidden, (ids, weights))
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    chunked.close()
    with raises("invalid_argument", "chunks: expected an int, got float"):
        group.device_step(ep_layer, TOKENS, chunks=2.0)
    with raises("invalid_argument", "chunks must be at least 1, not 0"):
        group.device_step(ep_layer, TOKENS, chunks=0)
    with raises("invalid_argument", "1 to 64 chunks", f"max_tokens={TOKENS}",
                f"not {TOKENS + 1}"):
        group.device_step(ep_layer, TOKENS, chunks=TOKENS + 1)
    step.close()
    with raises("invalid_argument", "the device step is closed"):
        step.run(hidden, (ids, weights))
    with raises("invalid_argument", "max_tokens >= 1"):
        group.device_step(ep_layer, 0)
    group.close()
