"""bench/run_grid.py's peers without a GPU: each peer computes the whole layer (the sink experts
too: in the same call where they have the routed experts' width, else in a second call of the
peer's bf16 form, added to the output), rotates through every input set moe bench timed (one
CUDA graph per set where it can be captured), is timed and fails on its own, and cuBLAS, always
eager, has its eager time too. torch, safetensors and the peer scripts are faked: a fake call
costs 1 + its input set's index ms on a fake device clock, so a median over the rotation tells
the sets apart."""
import contextlib
import json
import os
import re
import sys
import tempfile
import types

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
sys.modules.pop("torch", None)
import run_grid  # noqa: E402

clock = [0.0]  # the fake device's time, ms
capturing = []  # the graph being captured
graphs = []  # every graph captured
calls = []  # (peer, expert weights, x, topk_weights, topk_ids) of each call run, in order
fail = {}  # peer -> when it raises: "make" (building it) or "run"


class Tensor:
    """A name for what it holds, and a shape; slices, sums and differences name themselves."""

    def __init__(self, name, shape):
        self.name, self.shape = name, list(shape)

    def __getitem__(self, idx):
        rows, cols = idx
        assert rows == slice(None), idx
        a, b = cols.start or 0, self.shape[1] if cols.stop is None else cols.stop
        return Tensor(f"{self.name}[{a}:{b}]", [self.shape[0], b - a])

    def __sub__(self, n):
        return Tensor(f"{self.name}-{n}", self.shape)

    def __add__(self, other):
        return Tensor(f"{self.name}+{other.name}", self.shape)

    def __mul__(self, c):
        return self

    def contiguous(self):
        return self

    def cuda(self):
        return self


drawn = [0]


def randn(*shape, device, dtype):
    drawn[0] += 1
    return Tensor(f"randn{drawn[0]}", shape)


def cat(ts):
    return Tensor("cat(" + ",".join(t.name for t in ts) + ")",
                  [sum(t.shape[0] for t in ts)] + ts[0].shape[1:])


class Event:
    def __init__(self, enable_timing):
        self.t = None

    def record(self):
        self.t = clock[0]

    def elapsed_time(self, end):
        return end.t - self.t


class Graph:
    def __init__(self):
        self.work = []
        graphs.append(self)

    def replay(self):
        for w in self.work:
            w()


@contextlib.contextmanager
def graph(g):
    capturing.append(g)
    try:
        yield
    finally:
        capturing.pop()


stream = types.SimpleNamespace(wait_stream=lambda s: None)
torch = types.SimpleNamespace(
    manual_seed=lambda s: None, randn=randn, cat=cat, bfloat16="bf16",
    cuda=types.SimpleNamespace(
        Stream=lambda: stream, current_stream=lambda: stream,
        stream=lambda s: contextlib.nullcontext(), synchronize=lambda: None,
        empty_cache=lambda: None, Event=Event, CUDAGraph=Graph, graph=graph))
sys.modules["torch"] = torch


def load_file(path):
    """A routing file holds its T and width (k + S) as JSON."""
    with open(path) as f:
        d = json.load(f)
    name = os.path.basename(path)
    return {"topk_ids": Tensor(f"ids:{name}", [d["T"], d["width"]]),
            "topk_weights": Tensor(f"w:{name}", [d["T"], d["width"]])}


safetensors = types.ModuleType("safetensors")
safetensors.torch = types.SimpleNamespace(load_file=load_file)
sys.modules["safetensors"], sys.modules["safetensors.torch"] = safetensors, safetensors.torch


def run(peer, capturable, w13):
    """A peer's call: captured into the graph being captured where the peer can be, else run now,
    costing 1 + its input set's index ms."""
    def call(x, w, ids):
        if fail.get(peer) == "run":
            raise RuntimeError(f"{peer} broke")
        if capturing:
            if not capturable:
                raise RuntimeError("cannot capture: copies host tensors")
            capturing[-1].work.append(lambda: call(x, w, ids))
            return x
        calls.append((peer, w13.name, x.name, w.name, ids.name))
        clock[0] += 1 + int(re.search(r"_(\d+)\.safetensors", ids.name).group(1))
        return Tensor(f"{peer}({x.name})", x.shape)
    return call


def made(peer, w13):
    if fail.get(peer) == "make":
        raise RuntimeError(f"{peer} cannot be built")
    return w13


torch_moe = types.SimpleNamespace(
    grouped_mm_moe=lambda x, w13, w2, w, ids: run("grouped_mm", False, w13)(x, w, ids),
    loop_moe=lambda x, w13, w2, w, ids, dtype: run("loop", False, w13)(x, w, ids),
    quantize_rowwise_experts=lambda w13, w2: (Tensor(f"q({w13.name})", w13.shape), None,
                                              Tensor(f"q({w2.name})", w2.shape), None),
    scaled_grouped_moe=lambda x, q13, s13, q2, s2, w, ids: run("scaled", False, q13)(x, w, ids))


class TritonMoE:
    def __init__(self, w13, w2):
        self.call = run("triton", True, made("triton", w13))

    def __call__(self, x, w, ids):
        return self.call(x, w, ids)


class TritonMoEFp8Block:
    def __init__(self, q13, s13, q2, s2):
        self.call = run("triton_fp8", True, made("triton_fp8", q13))

    def __call__(self, x, w, ids):
        return self.call(x, w, ids)


triton_moe = types.SimpleNamespace(
    TritonMoE=TritonMoE, TritonMoEFp8Block=TritonMoEFp8Block,
    quantize_block_experts=lambda w13, w2: (Tensor(f"b({w13.name})", w13.shape), None,
                                            Tensor(f"b({w2.name})", w2.shape), None))
sys.modules["torch_moe"], sys.modules["triton_moe"] = torch_moe, triton_moe


def point(d, T=8, sinks=2, sink_intermediate=16, sets=3, graph=True):
    """A record of moe bench (E=4, k=2, I=16) and its routing files, one per input set."""
    rec = {"shape": "s", "tokens": T, "experts": 4, "top_k": 2, "hidden": 32, "intermediate": 16,
           "sink_experts": sinks, "sink_intermediate": sink_intermediate, "graph": graph,
           "input_sets": sets}
    files = [run_grid.routing_file(d, "s", T, s) for s in range(sets)]
    for f in files:
        with open(f, "w") as out:
            json.dump({"T": T, "width": 2 + sinks}, out)
    return rec, files


def ran(peer):
    """The calls of `peer` run since the last clear, without the peer's name."""
    return [c[1:] for c in calls if c[0] == peer]


def xs_and_sets(peer):
    return [(x, re.search(r"_(\d+)\.safetensors", ids).group(1)) for _, x, _, ids in ran(peer)]


with tempfile.TemporaryDirectory() as d:
    # bf16, Inkling-like: the sinks have the routed experts' width, so each peer runs them as
    # experts 4 and 5 of the same call, on the whole routing (k + S columns). Sets 0, 1, 2 cost
    # 1, 2, 3 ms: the median over the rotation is 2 (set 0 alone would give 1).
    rec, files = point(d)
    out, graphed, eager = run_grid.peers_for(rec, files, "P")
    assert out == {"torch_grouped_mm": 2.0, "triton": 2.0, "cublas": 2.0}, out
    # torch._grouped_mm cannot be captured and runs eagerly; Triton replays graphs, one per set.
    assert graphed == {"torch_grouped_mm": False, "triton": True, "cublas": False}, graphed
    assert len(graphs) == 1 + 3, len(graphs)  # the torch peer's failed capture, then Triton's
    # cuBLAS, timed eagerly, has its eager time like the others (its own).
    assert eager == {"torch_grouped_mm": 2.0, "triton": 2.0, "cublas": 2.0}, eager
    x0, x1, x2, w13, w2, sw13, sw2 = (f"randn{i}" for i in range(1, 8))
    for peer in ("grouped_mm", "triton", "loop"):
        assert {c[0] for c in ran(peer)} == {f"cat({w13},{sw13})"}, ran(peer)
        assert {c[2:] for c in ran(peer)} == {
            (f"w:s_8_{s}.safetensors", f"ids:s_8_{s}.safetensors") for s in range(3)}, ran(peer)
    # Every set in turn, each with its own activations: eagerly, and replaying Triton's graphs.
    # Both warm each set up before capturing; the torch peer then runs eagerly.
    rotation = [(x0, "0"), (x1, "1"), (x2, "2")]
    for peer in ("grouped_mm", "triton"):
        assert xs_and_sets(peer)[:9] == [s for s in rotation for _ in range(3)], xs_and_sets(peer)
        assert xs_and_sets(peer)[9:15] == rotation * 2, xs_and_sets(peer)

    # Sinks of another width: a second call of the same peer on the sink columns (ids - E), added
    # to the routed experts' output and timed with it (each set costs twice: median 4).
    calls.clear()
    drawn[0] = 0
    rec, files = point(d, sink_intermediate=8)
    out, graphed, eager = run_grid.peers_for(rec, files, "P")
    assert out == {"torch_grouped_mm": 4.0, "triton": 4.0, "cublas": 4.0}, out
    for peer in ("grouped_mm", "triton", "loop"):
        assert ran(peer)[:2] == [
            (w13, x0, "w:s_8_0.safetensors[0:2]", "ids:s_8_0.safetensors[0:2]"),
            (sw13, x0, "w:s_8_0.safetensors[2:4]", "ids:s_8_0.safetensors[2:4]-4")], ran(peer)

    # fp8: the routed experts quantised as each peer script does, the bf16 sinks in the peer's bf16
    # form (torch._grouped_mm, the Triton bf16 MoE), even at the routed experts' width.
    calls.clear()
    drawn[0] = 0
    rec, files = point(d)
    out, graphed, eager = run_grid.peers_for_fp8_block(rec, files, "P")
    assert out == {"torch_scaled_grouped_mm": 4.0, "triton": 4.0}, out
    assert graphed == {"torch_scaled_grouped_mm": False, "triton": True}, graphed
    assert ran("scaled")[0] == (f"q({w13})", x0, "w:s_8_0.safetensors[0:2]",
                                "ids:s_8_0.safetensors[0:2]"), ran("scaled")
    assert ran("grouped_mm")[0] == (sw13, x0, "w:s_8_0.safetensors[2:4]",
                                    "ids:s_8_0.safetensors[2:4]-4"), ran("grouped_mm")
    assert ran("triton_fp8")[0][0] == f"b({w13})" and ran("triton")[0][0] == sw13, calls

    # No sinks: the routed columns alone, one call; no graph replayed, so no eager times.
    calls.clear()
    drawn[0] = 0
    rec, files = point(d, sinks=0, sets=2, graph=False)
    out, graphed, eager = run_grid.peers_for(rec, files, "P")
    assert out == {"torch_grouped_mm": 2.0, "triton": 2.0, "cublas": 2.0}, out
    assert eager == {} and not any(graphed.values()), (graphed, eager)
    # Drawn: two sets' activations, then w13 (no sinks).
    assert ran("triton")[0] == ("randn3", x0, "w:s_8_0.safetensors[0:2]",
                                "ids:s_8_0.safetensors[0:2]"), ran("triton")
    # Above T=4096 cuBLAS (a Python loop over experts) is left out.
    rec, files = point(d, T=8192, sinks=0, sets=2, graph=False)
    assert set(run_grid.peers_for(rec, files, "P")[0]) == {"torch_grouped_mm", "triton"}

    # A peer that fails, to build or to run, is named with its error; the others are timed.
    for when in ("make", "run"):
        fail["triton"] = when
        rec, files = point(d)
        out, graphed, eager = run_grid.peers_for(rec, files, "P")
        why = "triton cannot be built" if when == "make" else "triton broke"
        assert out == {"torch_grouped_mm": 2.0, "cublas": 2.0, "error": f"triton: {why}"}, out
        assert "triton" not in graphed and "triton" not in eager, (graphed, eager)
    fail.clear()
    fail["scaled"] = "run"
    out, _, _ = run_grid.peers_for_fp8_block(*point(d), "P")
    assert out == {"triton": 4.0, "error": "torch_scaled_grouped_mm: scaled broke"}, out
    fail["triton_fp8"] = "make"
    out, _, _ = run_grid.peers_for_fp8_block(*point(d), "P")
    assert out == {"error": "torch_scaled_grouped_mm: scaled broke; triton: triton_fp8 cannot be "
                            "built"}, out
    fail.clear()
    # Every set's file, in set order, and only this point's.
    for name in ("s_8_10.safetensors", "s_80_0.safetensors", "s_8.safetensors"):
        open(os.path.join(d, name), "w").close()
    assert run_grid.routing_files(d, "s", 8) == [
        os.path.join(d, f"s_8_{s}.safetensors") for s in (0, 1, 2, 10)]
    assert run_grid.routing_files(os.path.join(d, "none"), "s", 8) == []
print("ok")
