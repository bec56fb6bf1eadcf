"""moe_registry: MoE-layer backends as plugins, from Python.

    import moe_registry as moe
    moe.list()                                   # the plugins found (moe list)
    sel = moe.select("configs/default.yaml")     # which backend a config selects, and why
    layer = moe.Layer.prepare(problem, {"w13": w13, "w2": w2}, backend="auto")
    out = layer(hidden, router_logits)           # or layer(hidden, (topk_ids, topk_weights))
    layer = moe.Layer.from_checkpoint("configs/mixtral_ckpt.yaml")  # a config's checkpoint:
    from moe_registry import torch_op            # torch.ops.moe_registry.moe_layer (needs torch)
    group = moe.ExpertParallelGroup(nccl_comm, layer)  # EP over the engine's NCCL communicator

A thin layer over the host C API (libmoe_core, moe/host/moe_host.h); arrays cross by DLPack
(NumPy, torch, CuPy), in the layer's memory (weights: host or one CUDA device). Every failure
raises MoeError(status, message).
"""

from . import _core
from ._ep import ExpertParallelGroup
from ._errors import MoeError
from ._layer import Layer
from ._problem import Problem
from ._registry import ConformanceSummary, PluginInfo, Registry, Selection, default_registry

__all__ = ["ConformanceSummary", "ExpertParallelGroup", "Layer", "MoeError", "PluginInfo",
           "Problem", "Registry", "Selection", "conformance", "default_registry", "describe",
           "list", "select", "supports", "version"]


def version():
    """{"host_api": (major, minor), "abi": (major, minor)} of the libmoe_core in use."""
    host, abi = _core.version()
    return {"host_api": tuple(host), "abi": tuple(abi)}


def list():  # noqa: A001 - the CLI's word
    """The plugins of the default registry (`moe list`)."""
    return default_registry().list()


def describe(name, problem=None):
    """`moe describe NAME`, with a problem: whether the plugin supports it."""
    return default_registry().describe(name, problem)


def supports(name, problem):
    return default_registry().supports(name, problem)


def select(config, *, ask_every=False):
    """`moe select --config`: a path, YAML text or dict -> Selection."""
    return default_registry().select(config, ask_every=ask_every)


def conformance(plugin_path, *, problems=None, report=None, seed=0, gpu_sized=False):
    """`moe conformance --plugin LIB` -> ConformanceSummary."""
    return default_registry().conformance(plugin_path, problems=problems, report=report, seed=seed,
                                          gpu_sized=gpu_sized)
