"""Bad input from Python: every wrong argument is a MoeError with the C API's status name and a
message naming the argument, never a crash."""

import ml_dtypes
import numpy as np
import pytest

import moe_registry as moe
from conftest import HIDDEN, MAX_TOKENS, TOKENS


def raises(status, *parts):
    """pytest.raises for a MoeError of `status` whose message holds every part."""
    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(moe.MoeError)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            suppressed = self.ctx.__exit__(*exc)
            err = self.info.value
            assert err.status == status, f"status {err.status}, expected {status}: {err.message}"
            for part in parts:
                assert part in err.message, f"'{part}' not in: {err.message}"
            assert str(err).startswith(status + ": ")
            return suppressed
    return Check()


def test_a_wrong_dtype_names_the_argument(layer, batch):
    hidden, logits = batch
    with raises("dtype_mismatch", "hidden: expected bf16, got f32"):
        layer(hidden.astype(np.float32), logits)
    with raises("dtype_mismatch", "logits: expected f32, got f64"):
        layer.route(logits.astype(np.float64))
    with raises("dtype_mismatch", "hidden: dtype complex64 has no moe_dtype"):
        layer(np.zeros((TOKENS, HIDDEN), np.complex64), logits)


def test_a_wrong_shape_names_the_argument(layer, batch):
    hidden, logits = batch
    with raises("shape_mismatch", "hidden: expected shape (*, 64), got (8, 65)"):
        layer(np.zeros((TOKENS, HIDDEN + 1), ml_dtypes.bfloat16), logits)
    with raises("shape_mismatch", "hidden: expected shape (*, 64), got (512)"):
        layer(hidden.reshape(-1), logits)
    with raises("shape_mismatch", "routing: the router logits have 7 rows, but hidden has 8 tokens"):
        layer(hidden, logits[:7])
    ids, weights = layer.route(logits)
    with raises("shape_mismatch", "topk_ids: expected shape (8, 2), got (7, 2)"):
        layer(hidden, (ids[:7], weights))
    with raises("shape_mismatch", "out: expected shape (8, 64), got (8, 32)"):
        layer(hidden, logits, out=np.zeros((TOKENS, 32), ml_dtypes.bfloat16))


def test_a_non_contiguous_view_names_the_argument(layer, batch):
    hidden, logits = batch
    wide = np.zeros((TOKENS, 2 * HIDDEN), ml_dtypes.bfloat16)
    with raises("invalid_argument", "hidden: a non-contiguous view", "strides (128, 2)"):
        layer(wide[:, ::2], logits)
    with raises("invalid_argument", "logits: a non-contiguous view"):
        layer(hidden, np.asfortranarray(logits))


class DlpackOnly:
    """An array seen only through __dlpack__ (no NumPy flags, no buffer for the Python check)."""
    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_a_read_only_array_seen_only_through_dlpack_is_not_written(layer, batch, tmp_path):
    """The binding imports what a call writes as writable: DLPack 1.0's read-only bit refuses."""
    hidden, logits = batch
    frozen = bytes(TOKENS * 2 * 4)
    ids = np.frombuffer(frozen, np.int32).reshape(TOKENS, 2)
    with raises("invalid_argument", "topk_ids: a read-only array"):
        layer.route(logits, topk_ids=DlpackOnly(ids))
    assert frozen == bytes(TOKENS * 2 * 4), "an immutable bytes object was written"
    path = tmp_path / "out.bin"
    path.write_bytes(bytes(TOKENS * HIDDEN * 2))
    mapped = np.memmap(path, np.uint16, mode="r", shape=(TOKENS, HIDDEN))
    with raises("invalid_argument", "out: a read-only array"):
        layer.run(hidden, *layer.route(logits), out=(DlpackOnly(mapped), "bf16"))
    # a writable array through the same path is written
    out = np.zeros((TOKENS, HIDDEN), np.uint16)
    layer.run(hidden, *layer.route(logits), out=(DlpackOnly(out), "bf16"))
    assert out.any()


def test_a_read_only_output_or_a_non_array_is_refused(layer, batch):
    hidden, logits = batch
    out = np.zeros((TOKENS, HIDDEN), ml_dtypes.bfloat16)
    out.flags.writeable = False
    with raises("invalid_argument", "out: a read-only array"):
        layer(hidden, logits, out=out)
    # buffers without NumPy's flags: an immutable bytes object seen through a memoryview
    frozen = memoryview(bytes(TOKENS * HIDDEN * 2)).cast("H", (TOKENS, HIDDEN))
    with raises("invalid_argument", "out: a read-only array"):
        layer(hidden, logits, out=(frozen, "bf16"))
    ids = memoryview(bytes(TOKENS * 2 * 4)).cast("i", (TOKENS, 2))
    with raises("invalid_argument", "topk_ids: a read-only array"):
        layer.route(logits, topk_ids=ids)
    frozen_ws = memoryview(bytes(layer.workspace_size(TOKENS) or 1))
    with raises("invalid_argument", "workspace: a read-only array"):
        layer.run(hidden, *layer.route(logits), workspace=frozen_ws)
    with raises("invalid_argument", "hidden: expected an array", "list"):
        layer([[0.0] * HIDDEN] * TOKENS, logits)
    with raises("invalid_argument", "routing: give router logits"):
        layer(hidden)
    with raises("invalid_argument", "bias: given, but the problem has no routing_bias"):
        layer(hidden, logits, bias=np.zeros(4, np.float32))
    ids, weights = layer.route(logits)
    with raises("invalid_argument", "bias: the selection bias of routing, but no router logits"):
        layer(hidden, (ids, weights), bias=np.zeros(4, np.float32))
    with raises("invalid_argument", "bias: the selection bias of routing, but no router logits"):
        layer(hidden, topk_ids=ids, topk_weights=weights, bias=np.zeros(4, np.float32))


def test_raw_bits_must_name_a_dtype_of_their_size(layer, batch):
    hidden, logits = batch
    with raises("invalid_argument", "hidden: 'bf17' is not a dtype name"):
        layer((hidden.view(np.uint16), "bf17"), logits)
    with raises("dtype_mismatch", "hidden: cannot read uint8 bits as bf16"):
        layer((np.zeros((TOKENS, HIDDEN), np.uint8), "bf16"), logits)


def test_more_tokens_than_max_tokens(layer):
    logits = np.zeros((MAX_TOKENS + 1, 4), np.float32)
    with raises("capacity_exceeded", "17 tokens", "max_tokens=16"):
        layer.route(logits)


def test_bad_weights_name_the_field(problem, weights):
    with raises("invalid_argument", "weights: unknown key 'w4'", "w13"):
        moe.Layer.prepare(problem, {**weights, "w4": weights["w2"]})
    with raises("dtype_mismatch", "w13"):
        moe.Layer.prepare(problem, {**weights, "w13": weights["w13"].astype(np.float32)},
                          backend="reference")
    with raises("shape_mismatch", "w2"):
        moe.Layer.prepare(problem, {**weights, "w2": weights["w2"][:, :, :16].copy()},
                          backend="reference")
    with raises("invalid_argument", "weights: expected a dict"):
        moe.Layer.prepare(problem, [weights["w13"], weights["w2"]])
    # an option's value is a string, number or bool, as in a config; None was passed as "None"
    with raises("invalid_argument", "options['a']: a NoneType is not an option value"):
        moe.Layer.prepare(problem, weights, backend="reference", options={"a": None})
    with raises("invalid_argument", "options['a']: a list is not an option value"):
        moe.Layer.prepare(problem, weights, backend="reference", options={"a": [1]})
    # NumPy scalars are their values (the reference ignores an option it does not take)
    for scalar in (np.int64(4), np.float32(0.5), np.bool_(True)):
        assert moe.Layer.prepare(problem, weights, backend="reference", options={"a": scalar})


def test_bad_problems_and_backends_name_the_key(problem, weights):
    with raises("config_error", "unknown key 'expertz'"):
        moe.Problem(expertz=4, top_k=2, hidden=64, intermediate=32)
    with raises("config_error", "format: 'fp7' is not one of"):
        problem.replace(format="fp7")
    with raises("config_error", "top_k"):
        problem.replace(top_k=5)
    with raises("config_error", "no_such_backend"):
        moe.Layer.prepare(problem, weights, backend="no_such_backend")
    with raises("invalid_argument", "backend is an empty string"):  # None is auto, "" is not
        moe.Layer.prepare(problem, weights, backend="")
    with raises("invalid_argument", "problem: expected a moe_registry.Problem or a dict"):
        moe.Layer.prepare("experts: 4", weights)


def test_bad_configs_plugins_and_directories_say_which(example_plugin):
    with raises("not_found", "/nonexistent/moe.yaml"):
        moe.select("/nonexistent/moe.yaml")
    with raises("config_error", "problme"):
        moe.select("backend: reference\nproblme: {}\n")
    with raises("not_found", "/nonexistent/libmoe_nothing.so"):
        moe.conformance("/nonexistent/libmoe_nothing.so")
    with raises("not_found", "/nonexistent/plugins"):
        moe.Registry(["/nonexistent/plugins"])
    with raises("not_found", "plugin directory '/nonexistent/plugins'"):
        moe.Registry("/nonexistent/plugins")
    with raises("invalid_argument", "scanner is an empty path"):
        moe.Registry(scanner="")
    with raises("not_found", "no plugin named 'no_such_plugin'"):
        moe.describe("no_such_plugin")
    # The C API reads a string up to its first NUL: a string holding one is refused, not cut.
    with raises("invalid_argument", "plugin_dirs[1]: the string holds a NUL character (byte 4)"):
        moe.Registry(["/tmp", "/tmp\0/nonexistent"])
    with raises("invalid_argument", "name: the string holds a NUL"):
        moe.describe("reference\0x")
    with raises("invalid_argument", "config (YAML text): the string holds a NUL"):
        moe.select("backend: reference\0\nproblem: {}\n")


def test_a_nul_in_a_backend_name_or_option_is_refused(problem, weights):
    with raises("invalid_argument", "backend: the string holds a NUL character (byte 9)"):
        moe.Layer.prepare(problem, weights, backend="reference\0trtllm_style")
    with raises("invalid_argument", "options['a']: the string holds a NUL"):
        moe.Layer.prepare(problem, weights, backend="reference", options={"a": "b\0c"})


def test_numpy_scalars_are_config_values_and_other_objects_are_refused():
    p = moe.Problem(experts=np.int64(8), top_k=np.int32(2), hidden=np.int64(64),
                    intermediate=np.uint16(32))
    assert p.experts == 8 and p.top_k == 2 and p.hidden == 64
    with raises("invalid_argument", "a value of type object is not a config value"):
        moe.Problem(experts=object(), top_k=2, hidden=64, intermediate=32)
    with raises("invalid_argument", "a value of type ndarray is not a config value"):
        moe.select({"backend": "reference",
                    "problem": {"experts": np.arange(3), "top_k": 2, "hidden": 64,
                                "intermediate": 32}})


def test_routing_outputs_given_twice_or_as_keywords(layer, batch):
    """(ids, weights) as the routing and as keywords is an error; keywords with router logits
    receive the routing."""
    hidden, logits = batch
    ids, weights = layer.route(logits)
    with raises("invalid_argument", "routing: (topk_ids, topk_weights) given twice"):
        layer(hidden, (ids, weights), topk_ids=ids)
    got_ids = np.full_like(ids, -7)
    got_weights = np.zeros_like(weights)
    out = layer(hidden, logits, topk_ids=got_ids, topk_weights=got_weights)
    assert (got_ids == ids).all() and (got_weights == weights).all()
    assert (out.view(np.uint16) == layer.run(hidden, ids, weights).view(np.uint16)).all()


def test_a_stream_or_a_count_of_the_wrong_type_is_named(layer, batch):
    hidden, logits = batch
    ids, weights = layer.route(logits)
    for bad in (1.5, -1, 2 ** 64, "0", True):
        with raises("invalid_argument", "stream: expected a CUDA stream handle"):
            layer.run(hidden, ids, weights, stream=bad)
    with raises("invalid_argument", "tokens: expected an int, got '3'"):
        layer.workspace_size("3")
    with raises("invalid_argument", "tokens: expected an int"):
        layer.route_workspace_size(2.0)


def test_a_dtype_tag_reads_integer_bits_only(layer, batch):
    hidden, logits = batch
    ids, weights = layer.route(logits)
    as_f16 = hidden.view(np.uint16).view(np.float16)
    with raises("dtype_mismatch", "hidden: a dtype tag reads the bits of an integer array",
                "float16"):
        layer.run((as_f16, "bf16"), ids, weights)
    out = layer.run((hidden.view(np.uint16), "bf16"), ids, weights)
    assert (out.view(np.uint16) == layer.run(hidden, ids, weights).view(np.uint16)).all()
    out = layer.run((hidden, "bf16"), ids, weights)  # an ml_dtypes array tagged as well
    assert (out.view(np.uint16) == layer.run(hidden, ids, weights).view(np.uint16)).all()
    # ... but not tagged as another dtype of its size: bf16 values are never read as f16 bits
    with raises("dtype_mismatch", 'hidden: tagged "f16", but the array\'s dtype is bfloat16'):
        layer.run((hidden, "f16"), ids, weights)


def test_an_array_dlpack_cannot_carry_names_its_dtype(layer, batch):
    _, logits = batch
    with raises("dtype_mismatch", "logits: a ndarray of dtype >f4 cannot be read"):
        layer.route(logits.astype(">f4"))
    with raises("dtype_mismatch", "logits: a ndarray of dtype object cannot be read"):
        layer.route(logits.astype(object))


def test_too_many_tokens_are_refused_before_outputs_are_made(layer):
    """A count far past max_tokens is a capacity error, not a MemoryError making its outputs."""
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (2 ** 33, 4), (0, 0))
    with raises("capacity_exceeded", "logits: 8589934592 tokens is more than the layer's "
                                     f"max_tokens={MAX_TOKENS}"):
        layer.route(huge)
    hidden = np.zeros((MAX_TOKENS + 1, HIDDEN), ml_dtypes.bfloat16)
    with raises("capacity_exceeded", f"hidden: {MAX_TOKENS + 1} tokens is more than"):
        layer.run(hidden, None, None)

