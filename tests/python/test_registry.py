"""moe_registry's registry calls against the build's plugins, checked as the CLI's tests check
`moe list`, `moe select`, `moe describe` and `moe conformance`."""

import pytest

import moe_registry as moe
from conftest import SOURCE_DIR


def test_reports_the_host_api_and_abi_versions():
    v = moe.version()
    assert v["host_api"] >= (1, 2) and v["abi"][0] == 1


def test_lists_the_reference_plugin():
    plugins = {p.name: p for p in moe.list()}
    ref = plugins["reference"]
    assert ref.memory == "host" and ref.path.endswith("libmoe_reference.so")
    assert "bf16" in ref.formats and "silu_mul" in ref.activations and ref.routings
    assert ref.abi[0] == 1
    # What its run() takes besides a plain run (host API 1.9): it adds onto an output and
    # routes in the call (Layer.run_routed).
    assert ref.accumulates and ref.routes_in_run


def test_a_decode_rule_is_listed_and_ranks_auto_at_decode_capacity(build_dir):
    # test_plugins/decode: priority 40, and 70 for max_tokens <= 8 (ABI 1.3).
    registry = moe.Registry([build_dir / "test_plugins" / "decode"])
    decode = {p.name: p for p in registry.list()}["fixture_decode"]
    assert (decode.priority, decode.decode_priority, decode.decode_max_tokens) == (40, 70, 8)
    reference = {p.name: p for p in registry.list()}["reference"]
    assert reference.decode_max_tokens == 0
    problem = {"experts": 4, "top_k": 2, "hidden": 64, "intermediate": 32, "max_tokens": 8}
    sel = registry.select({"backend": "auto", "problem": problem})
    assert sel.backend == "fixture_decode"
    assert "70, fixture_decode's decode priority for max_tokens <= 8, here 8" in sel.rule
    assert "priority 40, decode priority 70 for max_tokens <= 8" in registry.describe(
        "fixture_decode")


def test_decode_limits_by_format_are_listed_and_rank_auto_in_their_format(build_dir):
    # test_plugins/decode_by_format: 70 up to 8 tokens, up to 32 with mxfp4 weights (index 4 of
    # moe_format), none with fp8_block ones (index 2) (ABI 1.5).
    registry = moe.Registry([build_dir / "test_plugins" / "decode_by_format"])
    plugin = {p.name: p for p in registry.list()}["fixture_decode_by_format"]
    limits = plugin.decode_max_tokens_by_format
    assert limits[4] == 32 and limits[2] == -1
    assert all(v == 0 for i, v in enumerate(limits) if i not in (2, 4))
    problem = {"experts": 4, "top_k": 2, "hidden": 64, "intermediate": 32, "max_tokens": 16,
               "format": "mxfp4"}
    sel = registry.select({"backend": "auto", "problem": problem})
    assert sel.backend == "fixture_decode_by_format"
    assert "decode priority for mxfp4 at max_tokens <= 32, here 16" in sel.rule


def test_an_explicit_registry_searches_the_directories_it_is_given(build_dir):
    registry = moe.Registry([build_dir / "plugins"], use_env=False, use_default=False)
    assert "reference" in [p.name for p in registry.list()]
    assert all(isinstance(path, str) and reason for path, reason in registry.skipped)
    # one directory given alone, as a str or a Path, is that directory (not its characters)
    for alone in (str(build_dir / "plugins"), build_dir / "plugins"):
        one = moe.Registry(alone, use_env=False, use_default=False)
        assert [p.name for p in one.list()] == [p.name for p in registry.list()]


def test_selects_the_default_config():
    sel = moe.select(SOURCE_DIR / "configs" / "default.yaml")
    assert sel.backend == "reference"
    assert "default.yaml" in sel.rule and "selected: reference" in sel.explanation
    assert sel.problem.experts == 8 and sel.problem.hidden == 512 and sel.tokens == 64


def test_selects_from_yaml_text_and_from_a_dict():
    text = "backend: auto\nproblem: {experts: 4, top_k: 2, hidden: 64, intermediate: 32}\n"
    assert "auto" in moe.select(text, ask_every=True).rule
    sel = moe.select({"backend": "reference", "options": {"note": "x"},
                      "problem": {"experts": 4, "top_k": 2, "hidden": 64, "intermediate": 32}})
    assert sel.backend == "reference" and sel.options == {"note": "x"}


def test_options_reach_only_the_plugin_they_are_for():
    problem = {"experts": 4, "top_k": 2, "hidden": 64, "intermediate": 32}
    sel = moe.select({"backend": "auto", "problem": problem,
                      "options": {"reference": {"note": "mine"}}})
    assert sel.backend == "reference" and sel.options == {"note": "mine"}
    assert "options for reference: note=mine" in sel.explanation
    with pytest.raises(moe.MoeError, match="given to no plugin in particular"):
        moe.select({"backend": "auto", "problem": problem, "options": {"note": "x"}})
    with pytest.raises(moe.MoeError, match="options.nobody: no plugin of that name"):
        moe.select({"backend": "reference", "problem": problem, "options": {"nobody": {"a": 1}}})


def test_a_config_that_is_not_utf8_is_a_moe_error_with_readable_text(tmp_path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"backend: reference\ncaf\xe9: 1\nproblem: {experts: 4, top_k: 2, hidden: 64, "
                    b"intermediate: 32}\n")
    with pytest.raises(moe.MoeError) as info:
        moe.select(str(bad))
    assert info.value.status == "config_error" and "unknown key 'caf?'" in info.value.message


def test_describes_a_plugin_and_its_support_for_a_problem(problem):
    text = moe.describe("reference", problem)
    assert text.startswith("reference  (version") and "supported:   yes" in text
    answer = moe.supports("reference", problem)
    assert answer["supported"] and answer["routes"] is True


def test_a_problem_reads_back_normalised_and_compares_by_value(problem):
    assert problem.input_format == "bf16"  # "default" resolved to the format's own
    assert problem.as_dict()["max_tokens"] == 16 and problem.renormalize is True
    assert problem.replace(top_k=1).top_k == 1 and problem.replace(top_k=2) == problem
    assert "experts=4" in repr(problem)
    # Every key as_dict() writes, the inapplicable ones at their defaults, is a config's problem.
    assert moe.select({"backend": "reference", "problem": problem.as_dict()}).backend == "reference"
    grouped = problem.replace(routing="grouped_topk", num_groups=2, topk_group=1,
                              routed_scaling_factor=2.5)
    assert moe.select({"backend": "reference", "problem": grouped.as_dict()}).backend == "reference"


def test_conformance_of_the_example_plugin(example_plugin, tmp_path):
    report = tmp_path / "report.json"
    summary = moe.conformance(example_plugin, problems=SOURCE_DIR / "tests/capi/problems",
                              report=report, seed=7)
    assert summary.ok and summary.passed > 0 and summary.seed == 7
    assert report.is_file() and len(summary.cases) >= summary.passed
    assert {c["plugin"] for c in summary.cases} == {"example_cpu"}
