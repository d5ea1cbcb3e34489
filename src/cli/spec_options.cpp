#include "cli/spec_options.h"

#include "cli/cli_checks.h"

#include <fmt/format.h>

#include <cstdio>

#include "engine/draft_model.h"
#include "planner/plan_format.h"
#include "util/error.h"

namespace pagellm::cli {

void SpeculationOptions::add_to(CLI::App& sub) {
  sub.add_option("--spec-ngram", ngram,
                 "Speculative decoding by prompt lookup: draft what followed the last N tokens "
                 "where they occurred earlier (0: off; the output is the same either way)")
      ->capture_default_str()
      ->check(at_least(0));
  sub.add_option("--draft-model", draft_model,
                 "Speculative decoding with a smaller GGUF model of the same vocabulary as the "
                 "drafter");
  sub.add_option("--draft-max", draft_max, "Most tokens drafted per sequence and step")
      ->capture_default_str()
      ->check(at_least(1));
}

namespace {
SpeculationConfig to_config(const SpeculationOptions& o) {
  SpeculationConfig c;
  c.ngram = o.draft_model.empty() ? o.ngram : 0;
  c.draft_model = !o.draft_model.empty();
  c.draft_max = o.draft_max;
  return c;
}
}  // namespace

void SpeculationOptions::apply(PlanOptions& plan) const { plan.draft_rows = to_config(*this).draft_rows(); }

SpeculationConfig SpeculationOptions::config() const { return to_config(*this); }

}  // namespace pagellm::cli

namespace pagellm::cli {

void SpeculationOptions::attach(Engine& engine, const EngineSetup& setup, bool log) const {
  if (draft_model.empty() || draft_max <= 0) return;
  const SpeculationConfig sc = to_config(*this);
  ModelOptions mo;
  mo.model = draft_model;
  PlanOptions po;
  po.max_num_seqs = sc.max_batch;
  po.max_batched_tokens = 512;
  po.block_size = setup.plan.block_size;
  po.kv_type = setup.config.kv_type == DType::F32 ? "f32" : setup.config.kv_type == DType::Q8_0 ? "q8_0" : "f16";
  EnginePlan ep;
  try {
    {
      auto meta = GgufFile::open(draft_model);
      const auto hp = ModelHParams::from_gguf(*meta);
      po.max_seq_len = std::min<int64_t>(engine.max_seq_len(), hp.n_ctx_train);
    }
    po.kv_tokens = po.max_seq_len * po.max_num_seqs;
    ep = plan_engine(mo, po);
  } catch (const Error& e) {
    throw ConfigError(fmt::format("draft model {}: {}", draft_model, e.what()));
  }
  if (log) {
    std::fprintf(stderr, "draft model %s:\n", draft_model.c_str());
    std::fputs(format_plan_summary(ep.plan).c_str(), stderr);
  }
  auto model = ModelRunner::load(ep.path, {.placements = ep.plan.kv_placements()});
  auto tok = Tokenizer::from_gguf(model->file());
  const Tokenizer& main = *setup.tokenizer;
  if (tok->n_vocab() != main.n_vocab())
    throw ConfigError(fmt::format("draft model {}: its vocabulary has {} tokens, the model's {}",
                                  draft_model, tok->n_vocab(), main.n_vocab()));
  for (int32_t id = 0; id < main.n_vocab(); ++id)
    if (tok->token_to_piece(id, true) != main.token_to_piece(id, true))
      throw ConfigError(fmt::format(
          "draft model {}: its vocabulary differs from the model's at token {} ('{}' vs '{}')",
          draft_model, id, tok->token_to_piece(id, true), main.token_to_piece(id, true)));
  DraftModelConfig dc;
  dc.num_blocks = ep.plan.num_blocks;
  dc.block_size = ep.plan.block_size;
  dc.kv_type = ep.plan.kv_type;
  dc.max_batched_tokens = po.max_batched_tokens;
  dc.max_seqs = sc.max_batch;
  engine.set_draft_proposer(
      std::make_unique<DraftModelProposer>(std::move(model), *setup.pool, dc, main.n_vocab()));
}

}  // namespace pagellm::cli
