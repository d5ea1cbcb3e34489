// pagellm make-model: write a random-weight model for tests and benchmarks.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "model/registry.h"
#include "model/make_model.h"
#include "util/sizes.h"

#include <filesystem>

namespace pagellm::cli {

Runner add_make_model(CLI::App& app) {
  auto s = std::make_shared<MakeModelSpec>();
  auto out = std::make_shared<std::string>();
  auto type = std::make_shared<std::string>("q4_0");
  auto threads = std::make_shared<int>(0);
  CLI::App* sub = app.add_subcommand("make-model", "Write a random-weight GGUF model");
  sub->add_option("--arch", s->arch,
                  "Architecture: " + fmt::format("{}", fmt::join(make_model_architectures(), ", ")) +
                      " (mixtral: llama with experts)")
      ->check(CLI::IsMember(make_model_architectures()))
      ->capture_default_str();
  sub->add_option("--n-embd", s->n_embd, "Embedding size")->required();
  sub->add_option("--n-layer", s->n_layer, "Layers")->required();
  sub->add_option("--n-head", s->n_head, "Attention heads")->required();
  sub->add_option("--n-head-kv", s->n_head_kv, "KV heads")->required();
  sub->add_option("--n-ff", s->n_ff, "Feed-forward size")->required();
  sub->add_option("--head-dim", s->head_dim, "Head size (default n_embd / n_head)");
  sub->add_option("--sliding-window", s->sliding_window,
                  "Sliding window of gemma2 / gemma3 local layers (default: none)");
  sub->add_option("--n-expert", s->n_expert,
                  "Experts per MoE layer (default: none; mixtral and qwen3moe: 8)");
  sub->add_option("--n-expert-used", s->n_expert_used,
                  "Experts each token is routed to (default: 2 with experts)");
  sub->add_option("--n-ff-exp", s->n_ff_exp, "Feed-forward size of each expert (default --n-ff)");
  sub->add_option("--n-ff-shexp", s->n_ff_shexp,
                  "qwen35moe: feed-forward size of the shared expert (default --n-ff)");
  sub->add_option("--rope-dims", s->rope_dims,
                  "Rotated dims per head (default: all; qwen35, qwen35moe: a quarter)");
  sub->add_option("--full-attention-interval", s->full_attention_interval,
                  "qwen35, qwen35moe: every this-many-th layer is full attention, the others "
                  "gated delta-net")
      ->capture_default_str();
  sub->add_option("--ssm-state-size", s->ssm_state_size,
                  "qwen35, qwen35moe: delta-net head size (q/k and v)")
      ->capture_default_str();
  sub->add_option("--ssm-group-count", s->ssm_group_count, "qwen35, qwen35moe: delta-net q/k heads")
      ->capture_default_str();
  sub->add_option("--ssm-v-heads", s->ssm_v_heads,
                  "qwen35, qwen35moe: delta-net v heads (a multiple of --ssm-group-count)")
      ->capture_default_str();
  sub->add_option("--ssm-conv-kernel", s->ssm_conv_kernel, "qwen35, qwen35moe: conv kernel")
      ->capture_default_str();
  sub->add_option("--kv-lora-rank", s->kv_lora_rank,
                  "deepseek2: MLA latent size (default 2 x head size)");
  sub->add_option("--expert-gating", s->expert_gating,
                  "deepseek2: 1 softmax routing, 2 sigmoid with a selection bias")
      ->capture_default_str();
  sub->add_option("--vocab-from", s->vocab_from, "GGUF file whose tokenizer is copied")->required();
  sub->add_option("--type", *type,
                  "Type of the 2-D weights (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                  "q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, mxfp4)")
      ->capture_default_str();
  auto expert_type = std::make_shared<std::string>();
  sub->add_option("--expert-type", *expert_type,
                  "Type of the routed experts' stacks (default --type; e.g. mxfp4 with --type "
                  "q8_0, as gpt-oss files)");
  sub->add_option("--n-ctx", s->n_ctx, "Trained context length")->capture_default_str();
  sub->add_option("--seed", s->seed, "Random seed")->capture_default_str();
  sub->add_flag("--tied", s->tied, "Omit output.weight (tie it to token_embd)");
  sub->add_option("-t,--threads", *threads, "Threads");
  sub->add_option("-o,--output", *out, "Output file")->required();
  return [=] {
    s->type = parse_dtype(*type);
    if (!expert_type->empty()) s->expert_type = parse_dtype(*expert_type);
    ThreadPool pool(*threads > 0 ? *threads : ThreadPool::physical_cores());
    make_model(*s, *out, pool);
    fmt::print("wrote {} ({})\n", *out, format_size(std::filesystem::file_size(*out)));
    return 0;
  };
}

}  // namespace pagellm::cli
