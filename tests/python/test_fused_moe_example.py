"""examples/python/fused_moe.py on the CPU: a Mixtral-convention checkpoint written here, loaded by
the example's FusedMoE through the checkpoint adapters (Layer.from_checkpoint) and run through the
torch op, gives what the same weights prepared directly give, with the backend from the config or
named. Skipped, saying so, where torch is not installed."""

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the example needs it)")

import moe_registry as moe  # noqa: E402
import numpy_moe  # noqa: E402
from conftest import EXPERTS, HIDDEN, SOURCE_DIR, TOKENS, TOP_K, bf16  # noqa: E402

@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location(
        "fused_moe", SOURCE_DIR / "examples" / "python" / "fused_moe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def torch_bf16(array):
    return torch.from_numpy(array.view(np.uint16).copy()).view(torch.bfloat16)


def test_fused_moe_runs_like_the_same_weights_prepared_directly(example, checkpoint):
    config, weights, _ = checkpoint
    experts = example.FusedMoE(config)
    assert experts.moe_backend == "reference" and experts.num_experts == EXPERTS
    assert experts.layer.weights_from.endswith("model.safetensors (mixtral)")
    rng = np.random.default_rng(6)
    hidden = bf16(rng.uniform(-1, 1, (TOKENS, HIDDEN)))
    logits = rng.uniform(-2, 2, (TOKENS, EXPERTS)).astype(np.float32)
    got = experts(torch_bf16(hidden), torch.from_numpy(logits))
    direct = moe.Layer.prepare(config["problem"], weights, backend="reference")
    want = direct(hidden, logits)
    assert np.array_equal(got.view(torch.int16).numpy(), want.view(np.int16))
    ids, w = numpy_moe.softmax_topk(logits, TOP_K, renormalize=True)
    independent = numpy_moe.layer(hidden, weights["w13"], weights["w2"], ids, w)
    assert numpy_moe.rel_l2(want, independent) < 1e-3


def test_the_block_routes_with_the_checkpoint_gate(example, checkpoint):
    config, weights, gate = checkpoint
    block = example.MoEBlock(config)
    assert torch.equal(block.experts.router_weight, torch_bf16(gate))
    hidden = torch_bf16(bf16(np.random.default_rng(7).uniform(-1, 1, (2, 3, HIDDEN))))
    logits = block.experts.router_logits(hidden.reshape(-1, HIDDEN))
    want_logits = hidden.reshape(-1, HIDDEN).float().numpy() @ gate.astype(np.float32).T
    np.testing.assert_allclose(logits.numpy(), want_logits, rtol=1e-5, atol=1e-5)
    out = block(hidden)
    assert out.shape == hidden.shape
    direct = moe.Layer.prepare(config["problem"], weights, backend="reference")
    want = direct(hidden.reshape(-1, HIDDEN), logits)
    assert torch.equal(out.reshape(-1, HIDDEN), want)
    compiled = torch.compile(block, fullgraph=True)
    assert compiled(hidden).shape == hidden.shape


def test_moe_backend_replaces_the_configs(example, checkpoint):
    config, _, _ = checkpoint
    assert example.FusedMoE(config, moe_backend="auto").moe_backend == "reference"
    with pytest.raises(moe.MoeError, match="no_such_backend") as error:
        example.FusedMoE(config, moe_backend="no_such_backend")
    assert error.value.status == "config_error"


def test_a_config_without_checkpoint_is_refused(example, checkpoint):
    config, _, _ = checkpoint
    del config["checkpoint"]
    with pytest.raises(moe.MoeError, match="the config has no `checkpoint:` section"):
        example.FusedMoE(config)


def test_a_missing_tensor_is_named(example, checkpoint, tmp_path):
    config, _, _ = checkpoint
    config["checkpoint"]["layer"] = 0  # the file holds layer 1 only
    with pytest.raises(moe.MoeError, match="model.layers.0.block_sparse_moe"):
        example.FusedMoE(config)
