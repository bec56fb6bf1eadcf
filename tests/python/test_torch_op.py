"""torch.ops.moe_registry.moe_layer on the CPU through the reference plugin: the same output as the
layer called directly, traced by torch.compile through its fake implementation, its workspace
taken from torch, and every bad argument refused with a message naming it (eagerly and while
tracing). Skipped, saying so, where torch is not installed."""

import gc

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the torch op needs it)")

import moe_registry as moe  # noqa: E402
from moe_registry import torch_op  # noqa: E402
from conftest import EXPERTS, HIDDEN, INTERMEDIATE, MAX_TOKENS, TOKENS  # noqa: E402


@pytest.fixture
def torch_layer(problem):
    g = torch.Generator().manual_seed(1)
    w13 = ((torch.rand(EXPERTS, 2 * INTERMEDIATE, HIDDEN, generator=g) - 0.5) / 4).bfloat16()
    w2 = ((torch.rand(EXPERTS, HIDDEN, INTERMEDIATE, generator=g) - 0.5) / 3).bfloat16()
    return moe.Layer.prepare(problem, {"w13": w13, "w2": w2}, backend="reference")


@pytest.fixture
def inputs():
    g = torch.Generator().manual_seed(2)
    hidden = (torch.rand(TOKENS, HIDDEN, generator=g) * 2 - 1).bfloat16()
    logits = torch.rand(TOKENS, EXPERTS, generator=g) * 4 - 2
    return hidden, logits


def test_op_equals_the_direct_layer_call(torch_layer, inputs):
    hidden, logits = inputs
    want = torch_layer(hidden, logits)
    ids, weights = torch_layer.route(logits)
    handle = torch_op.handle(torch_layer)
    for got in (torch_op.moe_layer(hidden, logits, torch_layer),
                torch_op.moe_layer(hidden, (ids, weights), torch_layer),
                torch.ops.moe_registry.moe_layer(hidden, [logits], handle),
                torch.ops.moe_registry.moe_layer(hidden, [ids, weights], handle)):
        assert got.dtype == torch.bfloat16 and got.shape == (TOKENS, HIDDEN)
        assert torch.equal(got, want)
    assert torch.any(want != 0)


def test_op_takes_its_workspace_from_torch(torch_layer, inputs, monkeypatch):
    seen = []
    run = moe.Layer.run

    def spy(self, *args, workspace=None, **kwargs):
        seen.append(workspace)
        return run(self, *args, workspace=workspace, **kwargs)

    monkeypatch.setattr(moe.Layer, "run", spy)
    torch_op.moe_layer(*inputs, torch_layer)
    (workspace,) = seen
    assert isinstance(workspace, torch.Tensor) and workspace.dtype == torch.uint8
    assert workspace.numel() == torch_layer.workspace_size(TOKENS)


def test_a_caller_workspace_is_checked(torch_layer, inputs):
    hidden, logits = inputs
    ids, weights = torch_layer.route(logits)
    want = torch_layer(hidden, logits)
    got = torch_layer.run(hidden, ids, weights,
                          workspace=torch.empty(torch_layer.workspace_size(TOKENS) + 8,
                                                dtype=torch.uint8))
    assert torch.equal(got, want)
    with pytest.raises(moe.MoeError, match="workspace: expected u8, got f32"):
        torch_layer.run(hidden, ids, weights, workspace=torch.empty(16))


def test_compiled_fullgraph_matches_eager(torch_layer, inputs):
    hidden, logits = inputs
    handle = torch_op.handle(torch_layer)

    def block(h, l):
        return torch_op.moe_layer(h, l, handle) * 2

    compiled = torch.compile(block, fullgraph=True, dynamic=True)
    assert torch.equal(compiled(hidden, logits), block(hidden, logits))
    fewer = hidden[:3].contiguous(), logits[:3].contiguous()  # another T: the same graph
    assert torch.equal(compiled(*fewer), block(*fewer))


def test_fake_implementation_gives_the_output_shape(torch_layer):
    handle = torch_op.handle(torch_layer)
    hidden = torch.empty(5, HIDDEN, dtype=torch.bfloat16, device="meta")
    logits = torch.empty(5, EXPERTS, device="meta")
    out = torch.ops.moe_registry.moe_layer(hidden, [logits], handle)
    assert out.device.type == "meta" and out.shape == (5, HIDDEN) and out.dtype == torch.bfloat16
    with pytest.raises(moe.MoeError, match=r"router_logits: expected shape \(5, 4\)"):
        torch.ops.moe_registry.moe_layer(hidden, [logits[:, :3]], handle)


def test_opcheck_passes(torch_layer, inputs):
    hidden, logits = inputs
    torch.library.opcheck(torch.ops.moe_registry.moe_layer.default,
                          (hidden, [logits], torch_op.handle(torch_layer), None))


@pytest.mark.parametrize("case, message", [
    ("f32 hidden", "hidden: expected torch.bfloat16, got torch.float32"),
    ("narrow hidden", r"hidden: expected shape \(\*, 64\), got \(8, 32\)"),
    ("strided hidden", "hidden: a non-contiguous view"),
    ("int64 ids", "topk_ids: expected torch.int32, got torch.int64"),
    ("short weights", r"topk_weights: expected shape \(8, 2\), got \(7, 2\)"),
    ("three tensors", r"routing: expected \[router_logits\] or \(topk_ids, topk_weights\), got 3"),
    ("a bias", "routing_bias: given, but the problem has no routing_bias"),
    ("not routing", r"routing: expected router logits or \(topk_ids, topk_weights\), got int"),
    ("not a layer", "layer: expected a moe_registry.Layer, got str"),
])
def test_bad_arguments_are_named(torch_layer, inputs, case, message):
    hidden, logits = inputs
    ids, weights = torch_layer.route(logits)
    call = {
        "f32 hidden": lambda: (hidden.float(), logits, torch_layer),
        "narrow hidden": lambda: (hidden[:, :32].contiguous(), logits, torch_layer),
        "strided hidden": lambda: (torch.cat([hidden, hidden], 1)[:, ::2], logits, torch_layer),
        "int64 ids": lambda: (hidden, (ids.long(), weights), torch_layer),
        "short weights": lambda: (hidden, (ids, weights[:7]), torch_layer),
        "three tensors": lambda: (hidden, (ids, weights, weights), torch_layer),
        "a bias": lambda: (hidden, logits, torch_layer),
        "not routing": lambda: (hidden, 3, torch_layer),
        "not a layer": lambda: (hidden, logits, "reference"),
    }[case]
    bias = torch.zeros(EXPERTS) if case == "a bias" else None
    with pytest.raises(moe.MoeError, match=message):
        torch_op.moe_layer(*call(), routing_bias=bias)


def test_bad_arguments_are_refused_while_tracing(torch_layer, inputs):
    hidden, logits = inputs
    handle = torch_op.handle(torch_layer)
    compiled = torch.compile(lambda h, l: torch_op.moe_layer(h, l, handle), fullgraph=True)
    with pytest.raises(Exception, match="hidden: expected torch.bfloat16, got torch.float32"):
        compiled(hidden.float(), logits)


def test_a_handle_names_a_live_layer_only(problem, weights, inputs):
    layer = moe.Layer.prepare(problem, weights, backend="reference")
    handle = torch_op.handle(layer)
    assert torch_op.handle(layer) == handle
    del layer
    gc.collect()
    with pytest.raises(moe.MoeError, match=f"no live moe_registry.Layer has handle {handle}"):
        torch.ops.moe_registry.moe_layer(inputs[0], [inputs[1]], handle)


def test_more_tokens_than_the_layer_takes(torch_layer):
    hidden = torch.zeros(MAX_TOKENS + 1, HIDDEN, dtype=torch.bfloat16)
    with pytest.raises(moe.MoeError, match="max_tokens=16"):
        torch_op.moe_layer(hidden, torch.zeros(MAX_TOKENS + 1, EXPERTS), torch_layer)
