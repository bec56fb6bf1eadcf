"""Shared inputs of the Python package's tests: a small bf16 problem the reference plugin takes,
its canonical weights, and a batch. The package is the build tree's (<build>/python on
PYTHONPATH, set by tests/python/CMakeLists.txt), so its default registry is the build's plugins."""

import os
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
