"""Registry: the plugins found (moe_host_registry), and what the `moe` tool does with them as
calls: list, describe, select, prepare, conformance. The module-level functions of the package use
one default registry: the core's own plugins (beside libmoe_core) and MOE_PLUGIN_PATH."""

import dataclasses
import json
import os
import tempfile
import threading

from . import _core, _tensors
from ._errors import MoeError
from ._layer import Layer
from ._problem import Problem, as_problem, config_json, plain_scalar


@dataclasses.dataclass(frozen=True)
class PluginInfo:
    """One plugin, as `moe list --json` shows it."""
    name: str
    version: str
    description: str
    path: str
    aliases: list
    priority: int
    # The decode rule (ABI 1.3): `backend: auto` ranks the plugin by decode_priority for a problem
    # whose max_tokens is <= decode_max_tokens; 0 = no rule.
    decode_priority: int
    decode_max_tokens: int
    # ABI 1.5: the rule's limit per weight format, indexed by the C enum moe_format (bf16 0,
    # fp8_tensor 1, fp8_block 2, mxfp8 3, mxfp4 4, nvfp4 5, ...): where nonzero it replaces
    # decode_max_tokens for problems in that format; -1 = no rule there.
    decode_max_tokens_by_format: list
    memory: str  # "host" or "cuda_device"
    abi: tuple
    formats: list
    activations: list
    routings: list  # routing methods it routes itself
    # What run() takes besides a plain run: adding into the output (ABI 1.4), routing from router
    # logits in the same call, Layer.run_routed (ABI 1.6).
    accumulates: bool
    routes_in_run: bool


@dataclasses.dataclass(frozen=True)
class Selection:
    """What a config selects (`moe select`): the backend, the rule that chose it, every plugin's
    answer, and the config's problem, options, tokens and seed, ready for Layer.prepare."""
    backend: str
    rule: str
    explanation: str
    problem: Problem
    options: dict
    tokens: int
    seed: int


@dataclasses.dataclass(frozen=True)
class ConformanceSummary:
    """`moe conformance --plugin` counts; `cases` holds the JSON report's cases."""
    passed: int
    failed: int
    errors: int
    skipped: int
    empty: int
    self_checked: int
    seed: int
    cases: list

    @property
    def ok(self):
        return self.failed == 0 and self.errors == 0


def _paths(items):
    """A path or an iterable of paths as a list of str: one path given alone is one directory or
    file, never its characters one by one."""
    if isinstance(items, (str, bytes, os.PathLike)):
        items = [items]
    return [os.fsdecode(os.fspath(i)) for i in items]


class Registry:
    """Discovers plugins: `plugin_dirs` first (each must exist), `plugin_files` (each must load),
    then MOE_PLUGIN_PATH (use_env) and the core's plugin directory (use_default). A library that
    cannot be loaded is listed in `skipped` with the reason, not an error."""

    def __init__(self, plugin_dirs=(), plugin_files=(), *, use_env=True, use_default=True,
                 core_plugin_dir=None, scanner=None):
        self._native = _core.Registry(_paths(plugin_dirs), _paths(plugin_files), use_env,
                                      use_default, _path(core_plugin_dir), _path(scanner))

    def list(self):
        """The plugins found, in discovery order."""
        return [PluginInfo(**p) for p in self._native.plugins()]

    @property
    def skipped(self):
        """[(path, reason)] of the libraries found and not kept."""
        return list(self._native.skipped())

    def describe(self, name, problem=None):
        """`moe describe NAME [--config]`: the plugin, and with a problem whether it supports it."""
        native = as_problem(problem)._native if problem is not None else None
        return self._native.describe(name, native)

    def supports(self, name, problem):
        """{"supported": bool, "message": str, "routes": bool or None} of plugin `name`."""
        return self._native.supports(name, as_problem(problem)._native)

    def select(self, config, *, ask_every=False):
        """`moe select --config`: `config` is a YAML file's path, the YAML text, or a dict of a
        config's keys. ask_every asks every plugin, to say why not the others."""
        path, text = _config_source(config)
        native = self._native.select(path, text, ask_every)
        return Selection(native.backend, native.rule, native.explanation,
                         Problem._from_native(native.problem), dict(native.options), native.tokens,
                         native.seed)

    def prepare(self, problem, weights, backend=None, *, options=None, stream=None):
        """Layer.prepare with this registry."""
        if isinstance(problem, Selection):
            backend = problem.backend if backend is None else backend
            options = problem.options if options is None else options
            problem = problem.problem
        if not isinstance(weights, dict):
            raise MoeError("invalid_argument",
                           f"weights: expected a dict of moe_weights field names to arrays, got "
                           f"{type(weights).__name__}")
        weights = {k: _tensors.detached(v) for k, v in weights.items() if v is not None}
        # Device weights are copied to the host on their device's current stream.
        on_device = _tensors.first_on_cuda(weights.values())
        stream = _tensors.stream_arg(stream, on_device)
        native = self._native.prepare(backend, as_problem(problem)._native, weights,
                                      {k: plain_scalar(v) for k, v in (options or {}).items()},
                                      stream)
        if native.memory == "cuda_device":
            native.device_id = _tensors.current_device()
        return Layer(native)

    def prepare_checkpoint(self, config, backend=None, *, stream=None):
        """Layer.from_checkpoint with this registry."""
        path, text = _config_source(config)
        stream = _tensors.stream_arg(stream, None)
        native = self._native.prepare_checkpoint(path, text, backend, stream)
        if native.memory == "cuda_device":
            native.device_id = _tensors.current_device()
        return Layer(native)

    def conformance(self, plugin_path, *, problems=None, report=None, seed=0, gpu_sized=False):
        """`moe conformance --plugin LIB`: the library against the reference over the problem set
        (`problems` = a directory of problem files; default the installed set). Failing cases are
        counted, not raised; `report` also keeps the JSON report there."""
        with tempfile.TemporaryDirectory() as scratch:
            out = os.fspath(report) if report else os.path.join(scratch, "report.json")
            counts = self._native.conformance(os.fspath(plugin_path), _path(problems), out, seed,
                                              gpu_sized)
            with open(out) as f:
                cases = json.load(f).get("cases", [])
        return ConformanceSummary(cases=cases, **counts)


_default = None
_default_lock = threading.Lock()


def default_registry():
    """The registry the module-level functions use, opened on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Registry()
        return _default


def _path(p):
    return None if p is None else os.fspath(p)


def _config_source(config):
    """(path, text) of a config argument: exactly one is set."""
    if isinstance(config, dict):
        return None, config_json(config)
    if isinstance(config, os.PathLike):
        return os.fspath(config), None
    if isinstance(config, str):
        looks_like_path = "\n" not in config and (config.endswith((".yaml", ".yml"))
                                                  or os.path.isfile(config))
        return (config, None) if looks_like_path else (None, config)
    raise MoeError("invalid_argument",
                   f"config: expected a path, YAML text or a dict, got {type(config).__name__}")
