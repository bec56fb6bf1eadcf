"""Shared inputs of the Python package's tests: a small bf16 problem the reference plugin takes,
its canonical weights, a batch, and a Mixtral-convention checkpoint of such a layer. The package
is the build tree's (<build>/python on PYTHONPATH, set by tests/python/CMakeLists.txt), so its
default registry is the build's plugins."""

import json
import os
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import moe_registry as moe

SOURCE_DIR = Path(__file__).resolve().parents[2]
EXPERTS, TOP_K, HIDDEN, INTERMEDIATE, MAX_TOKENS, TOKENS = 4, 2, 64, 32, 16, 8


def bf16(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16)


@pytest.fixture
def problem():
    return moe.Problem(experts=EXPERTS, top_k=TOP_K, hidden=HIDDEN, intermediate=INTERMEDIATE,
                       format="bf16", activation="silu_mul", routing="softmax_topk",
                       renormalize=True, max_tokens=MAX_TOKENS)


@pytest.fixture
def weights():
    rng = np.random.default_rng(1)
    return {"w13": bf16(rng.uniform(-0.125, 0.125, (EXPERTS, 2 * INTERMEDIATE, HIDDEN))),
            "w2": bf16(rng.uniform(-0.18, 0.18, (EXPERTS, HIDDEN, INTERMEDIATE)))}


@pytest.fixture
def batch():
    rng = np.random.default_rng(2)
    hidden = bf16(rng.uniform(-1, 1, (TOKENS, HIDDEN)))
    logits = rng.uniform(-2, 2, (TOKENS, EXPERTS)).astype(np.float32)
    return hidden, logits


@pytest.fixture
def layer(problem, weights):
    return moe.Layer.prepare(problem, weights, backend="reference")


@pytest.fixture
def build_dir():
    path = os.environ.get("MOE_TEST_BUILD_DIR")
    if not path:
        pytest.fail("MOE_TEST_BUILD_DIR is not set (ctest sets it: the CMake build directory)")
    return Path(path)


@pytest.fixture
def example_plugin():
    path = os.environ.get("MOE_TEST_EXAMPLE_PLUGIN")
    if not path:
        pytest.fail("MOE_TEST_EXAMPLE_PLUGIN is not set (ctest sets it: the example CPU plugin)")
    return path


CHECKPOINT_PREFIX = "model.layers.1.block_sparse_moe"


def write_safetensors(path, tensors):
    """The safetensors layout: an 8-byte header length, the JSON header, then the data."""
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = array.tobytes()
        header[name] = {"dtype": "BF16", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


@pytest.fixture
def checkpoint(tmp_path):
    """(config with a `checkpoint:` section, canonical weights {w13 = [w1; w3], w2}, gate) of a
    Mixtral layer written here (experts.{e}.w1/w3/w2.weight, gate.weight), independent of the
    project's own safetensors writer."""
    rng = np.random.default_rng(5)
    w1, w3 = (bf16(rng.uniform(-0.125, 0.125, (EXPERTS, INTERMEDIATE, HIDDEN))) for _ in range(2))
    w2 = bf16(rng.uniform(-0.18, 0.18, (EXPERTS, HIDDEN, INTERMEDIATE)))
    gate = bf16(rng.uniform(-0.25, 0.25, (EXPERTS, HIDDEN)))
    tensors = {f"{CHECKPOINT_PREFIX}.gate.weight": gate}
    for e in range(EXPERTS):
        tensors.update({f"{CHECKPOINT_PREFIX}.experts.{e}.w1.weight": w1[e],
                        f"{CHECKPOINT_PREFIX}.experts.{e}.w3.weight": w3[e],
                        f"{CHECKPOINT_PREFIX}.experts.{e}.w2.weight": w2[e]})
    write_safetensors(tmp_path / "model.safetensors", tensors)
    config = {"backend": "reference",
              "problem": {"experts": EXPERTS, "top_k": TOP_K, "hidden": HIDDEN,
                          "intermediate": INTERMEDIATE, "format": "bf16", "activation": "silu_mul",
                          "routing": "softmax_topk", "renormalize": True, "max_tokens": 16},
              "checkpoint": {"path": str(tmp_path / "model.safetensors"), "convention": "mixtral",
                             "prefix": "model.layers.{layer}.block_sparse_moe", "layer": 1}}
    return config, {"w13": np.concatenate([w1, w3], axis=1), "w2": w2}, gate
