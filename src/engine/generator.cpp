#include "engine/generator.h"

#include <fmt/format.h>

#include <chrono>

#include "util/error.h"

namespace pagellm {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Generator::Generator(ModelRunner& model, const Tokenizer& tokenizer, ThreadPool& pool,
                     EngineConfig config)
    : engine_(std::make_unique<Engine>(model, tokenizer, pool, std::move(config))) {}

Generator::~Generator() = default;

GenerateResult Generator::generate(const std::vector<int32_t>& prompt_ids,
                                   const GenerateOptions& opts, const OnToken& on_token) {
  const int64_t context = engine_->max_seq_len();
  if (opts.max_tokens < 0)
    throw ConfigError(fmt::format("-n must be >= 0, got {}", opts.max_tokens));
  if (prompt_ids.empty()) throw ConfigError("the prompt is empty (no tokens to start from)");
  const int64_t n_prompt = static_cast<int64_t>(prompt_ids.size());
  if (n_prompt >= context)
    throw ConfigError(
        fmt::format("the prompt is {} tokens, which does not fit the context of {} "
                    "tokens (leave room for at least one generated token; raise -c)",
                    n_prompt, context));
  Request req;
  req.prompt = prompt_ids;
  req.sampling = opts.sampling;
  req.grammar = opts.grammar;
  req.max_tokens = opts.max_tokens;
  req.ignore_eos = opts.ignore_eos;
  req.prompt_logits = opts.prompt_logits;
  GenerateResult res;
  res.prompt_ids = prompt_ids;
  double t_first = 0;
  const EngineStats before = engine_->stats();
  const double t0 = now_seconds();
  engine_->submit(req, [&](const SeqEvent& ev) {
    if (ev.token >= 0) {
      if (res.output_ids.empty()) t_first = now_seconds();
      res.output_ids.push_back(ev.token);
    }
    if (!ev.prompt_logits.empty()) res.last_prompt_logits = ev.prompt_logits;
    res.text += ev.text;
    if (on_token && (ev.token >= 0 || !ev.text.empty())) on_token(ev.token, ev.text);
    if (ev.finished && !ev.error.empty()) res.error = ev.error;
    if (ev.finished)
      res.stop_reason = ev.finish_reason == FinishReason::kStop
                            ? "eos"
                            : std::string(finish_reason_name(ev.finish_reason));
  });
  while (engine_->has_work()) engine_->step();
  const double t_end = now_seconds();
  const EngineStats after = engine_->stats();
  res.spec_proposed = after.spec_proposed - before.spec_proposed;
  res.spec_accepted = after.spec_accepted - before.spec_accepted;
  res.prefill_seconds = (res.output_ids.empty() ? t_end : t_first) - t0;
  res.decode_seconds = res.output_ids.empty() ? 0 : t_end - t_first;
  if (res.stop_reason == "length" && static_cast<int64_t>(res.output_ids.size()) < opts.max_tokens)
    res.stop_reason = "context";
  return res;
}

}  // namespace pagellm
