"""torch.ops.moe_registry.moe_layer on a GPU through trtllm_style (bf16): CUDA tensors in and out,
the output within the bf16 tolerance of the reference's, replayed from a captured CUDA graph with
new inputs written into the captured ones, and compiled with torch.compile. Skipped, saying why,
without torch, a CUDA device or the trtllm_style plugin."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the torch op needs it)")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the GPU op tests need one", allow_module_level=True)

import moe_registry as moe  # noqa: E402
from moe_registry import torch_op  # noqa: E402

EXPERTS, TOP_K, HIDDEN, INTERMEDIATE, TOKENS = 8, 2, 256, 128, 24


def rel_l2(got, want):
    got, want = got.double().cpu(), want.double().cpu()
    return float(torch.linalg.norm(got - want) / torch.linalg.norm(want))


@pytest.fixture(scope="module")
def layers():
    if "trtllm_style" not in [p.name for p in moe.list()]:
        pytest.skip("the trtllm_style plugin is not built")
    problem = moe.Problem(experts=EXPERTS, top_k=TOP_K, hidden=HIDDEN, intermediate=INTERMEDIATE,
                          format="bf16", activation="silu_mul", routing="softmax_topk",
                          renormalize=True, max_tokens=64)
    g = torch.Generator().manual_seed(1)
    weights = {
        "w13": ((torch.rand(EXPERTS, 2 * INTERMEDIATE, HIDDEN, generator=g) - 0.5) / 8).bfloat16(),
        "w2": ((torch.rand(EXPERTS, HIDDEN, INTERMEDIATE, generator=g) - 0.5) / 6).bfloat16(),
    }
    return (moe.Layer.prepare(problem, weights, backend="trtllm_style"),
            moe.Layer.prepare(problem, weights, backend="reference"))


def batch(seed, tokens=TOKENS):
    g = torch.Generator().manual_seed(seed)
    hidden = (torch.rand(tokens, HIDDEN, generator=g) * 2 - 1).bfloat16()
    logits = torch.rand(tokens, EXPERTS, generator=g) * 4 - 2
    return hidden, logits


def test_cuda_tensors_in_and_out_match_the_reference(layers):
    gpu, ref = layers
    hidden, logits = batch(2)
    got = torch_op.moe_layer(hidden.cuda(), logits.cuda(), gpu)
    assert got.is_cuda and got.dtype == torch.bfloat16 and got.shape == (TOKENS, HIDDEN)
    assert rel_l2(got, ref(hidden, logits)) < 1e-2


def test_a_captured_graph_replays_new_inputs(layers):
    gpu, _ = layers
    hidden, logits = (t.cuda() for t in batch(3))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture, as torch advises
        torch_op.moe_layer(hidden, logits, gpu)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = torch_op.moe_layer(hidden, logits, gpu)
    for seed in (4, 5):
        new_hidden, new_logits = batch(seed)
        hidden.copy_(new_hidden)
        logits.copy_(new_logits)
        graph.replay()
        torch.cuda.synchronize()
        want = torch_op.moe_layer(hidden, logits, gpu)
        assert torch.equal(out, want), f"seed {seed}: replay differs by {rel_l2(out, want)}"


def test_compiled_fullgraph_matches_eager(layers):
    gpu, _ = layers
    handle = torch_op.handle(gpu)

    def block(h, l):
        return torch_op.moe_layer(h, l, handle) * 2

    compiled = torch.compile(block, fullgraph=True)
    hidden, logits = (t.cuda() for t in batch(6))
    assert torch.equal(compiled(hidden, logits), block(hidden, logits))
