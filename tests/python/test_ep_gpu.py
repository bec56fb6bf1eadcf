"""Expert parallelism over an NCCL communicator the test makes and owns, as vLLM's
PyNcclCommunicator does (ctypes, ncclCommInitRank; one rank runs on one GPU): a GPU plugin's layer
of a one-rank EP problem, stepped through the group, gives the single-rank step's output and
stays within the bf16 tolerance of the reference; after the group is closed the communicator
still answers, and the test destroys it. A layer of two ranks is refused with both sizes named.
Skipped, saying why, without torch, a CUDA device, NCCL or a GPU plugin."""

import ctypes
import os

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the GPU tests use it)")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the EP GPU tests need one", allow_module_level=True)

import moe_registry as moe  # noqa: E402
from test_bad_input import raises  # noqa: E402

EXPERTS, TOP_K, HIDDEN, INTERMEDIATE, TOKENS = 8, 2, 256, 128, 24


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def load_nccl():
    """NCCL as the engine loads it ($MOE_NCCL_LIBRARY, else the libnccl.so.2 torch brought)."""
    name = os.environ.get("MOE_NCCL_LIBRARY") or "libnccl.so.2"
    try:
        nccl = ctypes.CDLL(name)
    except OSError as e:
        pytest.skip(f"{name} cannot be loaded (set MOE_NCCL_LIBRARY): {e}")
    nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, NcclUniqueId,
                                      ctypes.c_int]
    nccl.ncclCommCount.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    nccl.ncclCommDestroy.argtypes = [ctypes.c_void_p]
    return nccl


@pytest.fixture
def engine_comm():
    """(nccl, a one-rank ncclComm_t as vLLM holds it: a ctypes.c_void_p); destroyed here."""
    nccl = load_nccl()
    uid = NcclUniqueId()
    assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
    comm = ctypes.c_void_p()
    torch.cuda.set_device(0)
    assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0
    yield nccl, comm
    assert nccl.ncclCommDestroy(comm) == 0, "the engine could not destroy its communicator"


def ep_problem(size):
    return moe.Problem(experts=EXPERTS, top_k=TOP_K, hidden=HIDDEN, intermediate=INTERMEDIATE,
                       format="bf16", activation="silu_mul", routing="softmax_topk",
                       renormalize=True, max_tokens=64, ep_placement="linear", ep_size=size,
                       ep_rank=0)


@pytest.fixture(scope="module")
def weights():
    g = torch.Generator().manual_seed(1)
    return {"w13": ((torch.rand(EXPERTS, 2 * INTERMEDIATE, HIDDEN, generator=g) - 0.5) / 8)
            .bfloat16(),
            "w2": ((torch.rand(EXPERTS, HIDDEN, INTERMEDIATE, generator=g) - 0.5) / 6).bfloat16()}


@pytest.fixture(scope="module")
def gpu_backend():
    for name in ("trtllm_style", "gpu_oracle"):
        if name in [p.name for p in moe.list()] and moe.supports(name, ep_problem(1))["supported"]:
            return name
    pytest.skip("no GPU plugin (trtllm_style, gpu_oracle) takes the problem here")


def rel_l2(got, want):
    got, want = got.double(), want.double()
    return float(torch.linalg.norm(got - want) / torch.linalg.norm(want))


def layers_and_batch(weights, backend, seed):
    """The GPU layer and the reference of a one-rank EP problem, and a routed batch (host)."""
    layer = moe.Layer.prepare(ep_problem(1), weights, backend=backend)
    reference = moe.Layer.prepare(ep_problem(1), weights, backend="reference")
    g = torch.Generator().manual_seed(seed)
    hidden = (torch.rand(TOKENS, HIDDEN, generator=g) * 2 - 1).bfloat16()
    ids, topk_weights = reference.route(torch.rand(TOKENS, EXPERTS, generator=g) * 4 - 2)
    return layer, reference, hidden, ids, topk_weights


def test_a_step_through_the_engines_communicator(engine_comm, weights, gpu_backend):
    nccl, comm = engine_comm
    layer, reference, hidden, ids, topk_weights = layers_and_batch(weights, gpu_backend, 2)
    alone = moe.ExpertParallelGroup.single_rank().step(layer, hidden, (ids, topk_weights))

    group = moe.ExpertParallelGroup(comm, layer, timeout_s=60)  # vLLM's comm: a ctypes.c_void_p
    assert (group.rank, group.world_size) == (0, 1)
    out = group.step(layer, hidden, (ids, topk_weights))
    assert out.dtype == torch.bfloat16 and not out.is_cuda and out.shape == (TOKENS, HIDDEN)
    assert torch.equal(out, alone)
    assert rel_l2(out, reference(hidden, (ids, topk_weights))) < 1e-2
    group.close()

    count = ctypes.c_int()
    assert nccl.ncclCommCount(comm, ctypes.byref(count)) == 0 and count.value == 1
    with moe.ExpertParallelGroup(comm.value, layer) as again:  # the int address works too
        assert torch.equal(again.step(layer, hidden, (ids, topk_weights)), alone)


def test_a_layer_of_two_ranks_on_a_one_rank_communicator_is_refused(engine_comm, weights,
                                                                    gpu_backend):
    _, comm = engine_comm
    problem = ep_problem(2)
    local = {k: v[:EXPERTS // 2].contiguous() for k, v in weights.items()}
    layer = moe.Layer.prepare(problem, local, backend=gpu_backend)
    with raises("config_error", "the NCCL communicator is rank 0 of 1, but the config says "
                "ep_rank=0 of ep_size=2"):
        moe.ExpertParallelGroup(comm, layer)


def test_a_device_step_through_the_engines_communicator(engine_comm, weights, gpu_backend):
    """The step that stays on the device, on CUDA tensors and torch's current stream, through the
    engine's one-rank communicator: the host step's bits (one rank: NCCL's copies)."""
    nccl, comm = engine_comm
    layer, _, hidden, ids, topk_weights = layers_and_batch(weights, gpu_backend, 3)
    with moe.ExpertParallelGroup(comm, layer) as group:
        want = group.step(layer, hidden, (ids, topk_weights))
        with group.device_step(layer, 32) as step:
            out = step.run(hidden.cuda(), (ids.cuda(), topk_weights.cuda()))
            torch.cuda.current_stream().synchronize()
    assert out.is_cuda and out.dtype == torch.bfloat16
    assert torch.equal(out.cpu().view(torch.int16), want.view(torch.int16))


def test_a_chunked_device_step_through_the_engines_communicator(engine_comm, weights,
                                                                 gpu_backend):
    """The same step in 4 chunks (the collectives on the step's own stream, each chunk's layer
    run on its own rows): within the bf16 tolerance of the host step, since a GPU plugin may pick
    another kernel path for a chunk's fewer rows; chunks=0 is refused."""
    nccl, comm = engine_comm
    layer, _, hidden, ids, topk_weights = layers_and_batch(weights, gpu_backend, 3)
    with moe.ExpertParallelGroup(comm, layer) as group:
        want = group.step(layer, hidden, (ids, topk_weights)).float()
        with group.device_step(layer, 32, chunks=4) as step:
            out = step.run(hidden.cuda(), (ids.cuda(), topk_weights.cuda()))
            torch.cuda.current_stream().synchronize()
        with raises("invalid_argument", "chunks must be at least 1"):
            group.device_step(layer, 32, chunks=0)
    got = out.cpu().float()
    assert (got - want).norm() / want.norm() < 1e-2
