"""Weights already on the GPU (torch CUDA tensors, as vLLM loads them): prepared by a GPU plugin
(trtllm_style, else gpu_oracle) and by the reference, each gives exactly the output of the same
weights passed from the host; a tensor that is a slice of a larger allocation works; a wrong
dtype, shape or view, or weights on another GPU than the current one, is a MoeError naming the
argument. Skipped, saying why, without torch, a CUDA device or a GPU plugin."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the GPU tests use it)")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the device weight tests need one", allow_module_level=True)

import moe_registry as moe  # noqa: E402
from test_bad_input import raises  # noqa: E402

EXPERTS, TOP_K, HIDDEN, INTERMEDIATE, TOKENS = 8, 2, 256, 128, 24


@pytest.fixture(scope="module")
def problem():
    return moe.Problem(experts=EXPERTS, top_k=TOP_K, hidden=HIDDEN, intermediate=INTERMEDIATE,
                       format="bf16", activation="silu_mul", routing="softmax_topk",
                       renormalize=True, max_tokens=64)


@pytest.fixture(scope="module")
def gpu_backend(problem):
    for name in ("trtllm_style", "gpu_oracle"):
        if name in [p.name for p in moe.list()] and moe.supports(name, problem)["supported"]:
            return name
    pytest.skip("no GPU plugin (trtllm_style, gpu_oracle) takes the problem here")


@pytest.fixture(scope="module")
def host_weights():
    g = torch.Generator().manual_seed(1)
    return {"w13": ((torch.rand(EXPERTS, 2 * INTERMEDIATE, HIDDEN, generator=g) - 0.5) / 8)
            .bfloat16(),
            "w2": ((torch.rand(EXPERTS, HIDDEN, INTERMEDIATE, generator=g) - 0.5) / 6).bfloat16()}


def cuda(weights, device="cuda:0"):
    return {k: v.to(device) for k, v in weights.items()}


def routed_batch(layer, seed=2):
    g = torch.Generator().manual_seed(seed)
    hidden = (torch.rand(TOKENS, HIDDEN, generator=g) * 2 - 1).bfloat16()
    logits = torch.rand(TOKENS, EXPERTS, generator=g) * 4 - 2
    return hidden, logits


def run(layer, hidden, logits):
    if layer.memory == "cuda_device":
        return layer(hidden.cuda(), logits.cuda()).cpu()
    return layer(hidden, logits)


@pytest.mark.parametrize("where", ["gpu", "reference"])
def test_device_weights_prepare_exactly_like_host_weights(problem, gpu_backend, host_weights,
                                                          where):
    backend = gpu_backend if where == "gpu" else "reference"
    from_host = moe.Layer.prepare(problem, host_weights, backend=backend)
    from_device = moe.Layer.prepare(problem, cuda(host_weights), backend=backend)
    hidden, logits = routed_batch(from_host)
    want, got = run(from_host, hidden, logits), run(from_device, hidden, logits)
    assert torch.count_nonzero(want) > 0
    assert torch.equal(got, want)


def test_a_slice_of_a_larger_allocation_is_copied_from_its_offset(problem, gpu_backend,
                                                                   host_weights):
    big = torch.cat([torch.zeros_like(host_weights["w13"][:1]), host_weights["w13"]]).cuda()
    weights = {"w13": big[1:], "w2": host_weights["w2"].cuda()}  # contiguous, 1 expert in
    from_device = moe.Layer.prepare(problem, weights, backend=gpu_backend)
    from_host = moe.Layer.prepare(problem, host_weights, backend=gpu_backend)
    hidden, logits = routed_batch(from_host, 3)
    assert torch.equal(run(from_device, hidden, logits), run(from_host, hidden, logits))


def test_bad_device_weights_name_the_argument(problem, gpu_backend, host_weights):
    weights = cuda(host_weights)
    with raises("invalid_argument", "weights['w13']: a non-contiguous view"):
        moe.Layer.prepare(problem, {**weights, "w13": weights["w13"].transpose(1, 2)},
                          backend=gpu_backend)
    with raises("dtype_mismatch", "w13"):
        moe.Layer.prepare(problem, {**weights, "w13": weights["w13"].float()}, backend=gpu_backend)
    with raises("shape_mismatch", "w2"):
        moe.Layer.prepare(problem, {**weights, "w2": weights["w2"][:, :, :64].contiguous()},
                          backend=gpu_backend)
    with raises("invalid_argument", "weights['w2']: on cpu, but weights['w13'] is on cuda:0"):
        moe.Layer.prepare(problem, {**weights, "w2": host_weights["w2"]}, backend=gpu_backend)


def test_weights_on_another_gpu_than_the_current_one(problem, gpu_backend, host_weights):
    if torch.cuda.device_count() < 2:
        pytest.skip("one CUDA device: another GPU's weights need two")
    weights = cuda(host_weights, "cuda:1")
    with raises("invalid_argument", "the weights are on cuda:1", "on cuda:0, the calling "
                "thread's current CUDA device"):
        moe.Layer.prepare(problem, weights, backend=gpu_backend)
    # A host plugin takes them from any device.
    layer = moe.Layer.prepare(problem, weights, backend="reference")
    hidden, logits = routed_batch(layer)
    assert torch.equal(run(layer, hidden, logits),
                       run(moe.Layer.prepare(problem, host_weights, backend="reference"), hidden,
                           logits))
