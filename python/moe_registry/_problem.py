"""Problem: an MoE layer's shape and numerics, named as a config's ``problem:`` section names them
(the moe_problem field names, enums by their spelling: ``format="bf16"``). The core parses and
validates it (moe_host_problem_parse), so a wrong key or value is a MoeError naming it."""

import json

from . import _core
from ._errors import MoeError


def plain_scalar(x):
    """A NumPy or torch scalar (.item() and an empty shape) as its Python value (np.bool_ a bool,
    np.int64 an int); anything else, one-element arrays included, as it is."""
    item = getattr(x, "item", None)
    if callable(item) and tuple(getattr(x, "shape", (None,))) == ():
        try:
            return item()
        except (TypeError, ValueError):
            pass
    return x


def config_json(value):
    """A config or problem mapping as JSON text for the core: NumPy and torch scalars as their
    Python values (plain_scalar); anything else JSON cannot hold is a MoeError."""
    def plain(x):
        value = plain_scalar(x)
        if value is x:
            raise MoeError("invalid_argument",
                           f"a value of type {type(x).__name__} is not a config value (numbers, "
                           f"strings, lists and mappings of them)")
        return value
    return json.dumps(value, default=plain)


class Problem:
    """``Problem(experts=8, top_k=2, hidden=512, intermediate=256, format="bf16")``, or a mapping
    of the same keys. Fields not given take the config defaults; read them as attributes or with
    ``as_dict()`` (every key, normalised: ``input_format`` "default" becomes the format's own)."""

    def __init__(self, mapping=None, **fields):
        given = {**dict(mapping or {}), **fields}
        self._native = _core.Problem.parse(config_json(given))
        self._fields = json.loads(self._native.to_json())

    @classmethod
    def _from_native(cls, native):
        problem = cls.__new__(cls)
        problem._native = native
        problem._fields = json.loads(native.to_json())
        return problem

    def as_dict(self):
        return dict(self._fields)

    def replace(self, **fields):
        """A copy with some fields changed."""
        return Problem(self._fields, **fields)

    def __getattr__(self, key):
        fields = self.__dict__.get("_fields", {})
        if key in fields:
            return fields[key]
        raise AttributeError(f"Problem has no field '{key}'; fields: {', '.join(fields)}")

    def __eq__(self, other):
        return isinstance(other, Problem) and self._fields == other._fields

    def __repr__(self):
        body = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"Problem({body})"


def as_problem(problem):
    """A Problem from a Problem or a mapping (the argument of every call that takes one)."""
    if isinstance(problem, Problem):
        return problem
    if isinstance(problem, dict):
        return Problem(problem)
    raise MoeError("invalid_argument",
                   f"problem: expected a moe_registry.Problem or a dict, got {type(problem).__name__}")
