"""The MoE architectures the parity kit builds with transformers, and how each maps onto our
checkpoint conventions (docs/design.md §3.4) and problem keys (README, Configs).

Each entry names transformers' public classes by name (so a missing one is reported, not an
ImportError), the tiny config, the decoder layer whose MoE block is compared, where that block
and its router live, our convention, the problem that describes the block, and how the router
ranks experts (for the near-tie report). Sizes are small but keep H and I multiples of 128 and
64, so the GPU backends take the same problems.
"""
import dataclasses
import math
from typing import Callable, Optional

HIDDEN, INTER, SHARED_INTER, VOCAB = 256, 128, 128, 128


def _attention(**extra):
    # Attention never runs (the MoE block is called directly); keep it small and valid.
    return dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, bos_token_id=1, eos_token_id=2,
                **extra)


@dataclasses.dataclass(frozen=True)
class Arch:
    name: str
    config_class: str        # transformers.<config_class>
    model_class: str         # transformers.<model_class> (a *ForCausalLM)
    config: dict             # the tiny config's keyword arguments
    layer: int               # the decoder layer whose MoE block is compared
    convention: str          # our checkpoint convention
    problem: Callable        # (transformers config) -> our problem keys (format added later)
    selection: str           # "logits": top-k of the logits; "grouped": DeepSeek-V3 noaux_tc
    block_attrs: tuple = ("mlp", "block_sparse_moe")  # the MoE block on the decoder layer
    router_attrs: tuple = ("gate", "router")          # the router on the block
    gate_up_gain: float = 1.0  # gate/up weights drawn at gain / sqrt(H)
    refusal: Optional[str] = None  # a documented loader refusal expected for this architecture


def _softmax_problem(c, experts, inter, renormalize, shared=0):
    p = dict(experts=experts, top_k=c.num_experts_per_tok, hidden=c.hidden_size,
             intermediate=inter, activation="silu_mul", routing="softmax_topk",
             renormalize=bool(renormalize))
    if shared:
        p["shared_intermediate"] = shared
    return p


def _grouped_problem(c):
    return dict(experts=c.n_routed_experts, top_k=c.num_experts_per_tok, hidden=c.hidden_size,
                intermediate=c.moe_intermediate_size, activation="silu_mul",
                routing="grouped_topk", score_function="sigmoid", routing_bias=True,
                num_groups=c.n_group, topk_group=c.topk_group,
                renormalize=bool(c.norm_topk_prob),
                routed_scaling_factor=float(c.routed_scaling_factor),
                shared_intermediate=c.moe_intermediate_size * c.n_shared_experts)


def _gpt_oss_problem(c):
    return dict(experts=c.num_local_experts, top_k=c.num_experts_per_tok, hidden=c.hidden_size,
                intermediate=c.intermediate_size, activation="swiglu_oai",
                activation_alpha=float(getattr(c, "swiglu_alpha", 1.702)),
                activation_limit=float(getattr(c, "swiglu_limit", 7.0)), expert_bias=True,
                routing="softmax_topk", renormalize=True)


ARCHITECTURES = {
    a.name: a for a in [
        Arch("mixtral", "MixtralConfig", "MixtralForCausalLM",
             _attention(intermediate_size=INTER, num_local_experts=8, num_experts_per_tok=2),
             layer=1, convention="mixtral", selection="logits",
             problem=lambda c: _softmax_problem(c, c.num_local_experts, c.intermediate_size,
                                                True)),
        Arch("qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM",
             _attention(intermediate_size=2 * INTER, moe_intermediate_size=INTER, num_experts=16,
                        num_experts_per_tok=4, norm_topk_prob=True, head_dim=64),
             layer=1, convention="qwen_moe", selection="logits",
             problem=lambda c: _softmax_problem(c, c.num_experts, c.moe_intermediate_size,
                                                c.norm_topk_prob)),
        Arch("qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeForCausalLM",
             _attention(intermediate_size=2 * INTER, moe_intermediate_size=INTER, num_experts=16,
                        num_experts_per_tok=4, norm_topk_prob=False,
                        shared_expert_intermediate_size=SHARED_INTER),
             layer=1, convention="qwen_moe", selection="logits",
             problem=lambda c: _softmax_problem(c, c.num_experts, c.moe_intermediate_size,
                                                c.norm_topk_prob,
                                                c.shared_expert_intermediate_size),
             # Its per-token sigmoid gate on the shared expert is not in the ABI (§3.4).
             refusal="shared_expert_gate"),
        Arch("olmoe", "OlmoeConfig", "OlmoeForCausalLM",
             _attention(intermediate_size=INTER, num_experts=16, num_experts_per_tok=4,
                        norm_topk_prob=False),
             layer=1, convention="qwen_moe", selection="logits",
             problem=lambda c: _softmax_problem(c, c.num_experts, c.intermediate_size,
                                                c.norm_topk_prob)),
        Arch("deepseek_v3", "DeepseekV3Config", "DeepseekV3ForCausalLM",
             _attention(intermediate_size=2 * INTER, moe_intermediate_size=INTER,
                        n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1,
                        n_group=4, topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True,
                        first_k_dense_replace=1, kv_lora_rank=32, q_lora_rank=64,
                        qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32, head_dim=16),
             layer=1, convention="deepseek", selection="grouped", problem=_grouped_problem),
        Arch("glm4_moe", "Glm4MoeConfig", "Glm4MoeForCausalLM",
             _attention(intermediate_size=2 * INTER, moe_intermediate_size=INTER,
                        n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1,
                        n_group=1, topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                        first_k_dense_replace=1, head_dim=64),
             layer=1, convention="deepseek", selection="grouped", problem=_grouped_problem),
        Arch("gpt_oss", "GptOssConfig", "GptOssForCausalLM",
             _attention(intermediate_size=INTER, num_local_experts=8, num_experts_per_tok=4,
                        head_dim=64, layer_types=["sliding_attention", "full_attention"]),
             layer=1, convention="gpt_oss", selection="logits", problem=_gpt_oss_problem,
             # Large enough that the clamp at swiglu_limit bites on some elements.
             gate_up_gain=4.0),
    ]
}

DEFAULT = ("mixtral", "qwen3_moe", "qwen2_moe", "olmoe", "deepseek_v3", "glm4_moe", "gpt_oss")


def init_std(name, shape, hidden, gain, is_router):
    """The std a MoE parameter is redrawn with: 1/sqrt(fan_in), times `gain` on expert gate/up;
    0.1 for biases. fan_in is H for the router and gate/up, and the rest of one down matrix for
    down (its layout differs between modules: [E, H, I], [E, I, H], [H, I])."""
    if name.endswith("bias"):
        return 0.1
    if is_router or "expert_gate" in name:
        return hidden ** -0.5
    if "down" in name or name.endswith("w2.weight"):
        return (math.prod(shape[-2:]) // hidden) ** -0.5
    return gain * hidden ** -0.5
