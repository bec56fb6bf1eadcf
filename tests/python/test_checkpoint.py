"""Layer.from_checkpoint (moe_host_layer_prepare_checkpoint) with NumPy: a Mixtral-convention
checkpoint written by conftest loads through the adapters into the layer the same weights make
when prepared directly, with its router; and a caller's workspace is used or refused."""

import numpy as np
import pytest

import moe_registry as moe
from conftest import EXPERTS, HIDDEN, TOKENS


def test_a_checkpoint_layer_runs_like_its_weights(checkpoint, batch):
    config, weights, _ = checkpoint
    layer = moe.Layer.from_checkpoint(config)
    direct = moe.Layer.prepare(config["problem"], weights, backend="reference")
    hidden, logits = batch
    assert layer.backend == "reference" and layer.problem == direct.problem
    np.testing.assert_array_equal(layer(hidden, logits).view(np.uint16),
                                  direct(hidden, logits).view(np.uint16))


def test_the_layer_keeps_the_checkpoint_router(checkpoint):
    config, weights, gate = checkpoint
    layer = moe.Layer.from_checkpoint(config)
    router = layer.router_tensors()
    assert set(router) == {"router_weight"}
    bits, dtype = router["router_weight"]
    assert dtype == "bf16" and bits.shape == (EXPERTS, HIDDEN)
    np.testing.assert_array_equal(bits, gate.view(np.uint16))
    assert layer.real_experts == EXPERTS and layer.router_dtype == "bf16"
    assert layer.weights_from == f"checkpoint {config['checkpoint']['path']} (mixtral)"
    direct = moe.Layer.prepare(config["problem"], weights, backend="reference")
    assert direct.router_tensors() == {} and direct.weights_from == "weights"
    assert direct.real_experts == 0 and direct.router_dtype == ""


def test_a_named_backend_replaces_the_configs(checkpoint):
    config, _, _ = checkpoint
    config["backend"] = "no_such_backend"  # the config's own choice is made first
    with pytest.raises(moe.MoeError, match="no_such_backend"):
        moe.Layer.from_checkpoint(config)
    config["backend"] = "reference"
    assert moe.Layer.from_checkpoint(config, backend="auto").backend == "reference"
    with pytest.raises(moe.MoeError, match="backend is an empty string") as error:
        moe.Layer.from_checkpoint(config, backend="")  # None is the config's backend, "" is not
    assert error.value.status == "invalid_argument"
    with pytest.raises(moe.MoeError, match="other_backend") as error:
        moe.Layer.from_checkpoint(config, backend="other_backend")
    assert error.value.status == "config_error"


def test_auto_gives_the_plugin_it_picks_that_plugins_options(checkpoint, capfd):
    config, _, _ = checkpoint
    config["backend"] = "auto"
    config["options"] = {"reference": {"tile_m": 4}}  # the reference logs what it ignores
    layer = moe.Layer.from_checkpoint(config)
    if layer.backend != "reference":
        pytest.skip(f"auto picked {layer.backend} here")
    assert "option 'tile_m' is ignored" in capfd.readouterr().err


def test_checkpoint_errors_name_the_problem(checkpoint):
    config, _, _ = checkpoint
    plain = {k: v for k, v in config.items() if k != "checkpoint"}
    with pytest.raises(moe.MoeError, match="the config has no `checkpoint:` section"):
        moe.Layer.from_checkpoint(plain)
    config["checkpoint"]["path"] = "/nonexistent/model.safetensors"
    with pytest.raises(moe.MoeError, match="/nonexistent/model.safetensors"):
        moe.Layer.from_checkpoint(config)


def test_a_caller_workspace_is_used_and_checked(layer, batch):
    hidden, logits = batch
    ids, weights = layer.route(logits, workspace=np.empty(layer.route_workspace_size(TOKENS),
                                                          np.uint8))
    want = layer.run(hidden, ids, weights)
    workspace = np.empty(layer.workspace_size(TOKENS), np.uint8)
    got = layer.run(hidden, ids, weights, workspace=workspace)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    with pytest.raises(moe.MoeError, match="workspace: expected u8, got f32"):
        layer.run(hidden, ids, weights, workspace=np.empty(4, np.float32))
    with pytest.raises(moe.MoeError, match=r"workspace: expected shape \(\*\), got \(2, 2\)"):
        layer.run(hidden, ids, weights, workspace=np.empty((2, 2), np.uint8))
