#include "engine/generator.h"

#include <fmt/format.h>

#include <chrono>

#include "engine/engine.h"
#include "util/error.h"

namespace pagellm {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Generator::Generator(LlamaModel& model, const Tokenizer& tokenizer, ThreadPool& pool)
    : model_(model), tokenizer_(tokenizer), pool_(pool) {}

GenerateResult Generator::generate(const std::vector<int32_t>& prompt_ids,
                                   const GenerateOptions& opts, const OnToken& on_token) {
  const auto& hp = model_.hparams();
  const int64_t context = opts.context > 0 ? opts.context : hp.n_ctx_train;
  if (opts.max_tokens < 0)
    throw ConfigError(fmt::format("-n must be >= 0, got {}", opts.max_tokens));
  if (prompt_ids.empty()) throw ConfigError("the prompt is empty (no tokens to start from)");
  const int64_t n_prompt = static_cast<int64_t>(prompt_ids.size());
  if (n_prompt >= context)
    throw ConfigError(
        fmt::format("the prompt is {} tokens, which does not fit the context of {} "
                    "tokens (leave room for at least one generated token; raise -c)",
                    n_prompt, context));
  const int64_t total = std::min<int64_t>(context, n_prompt + opts.max_tokens);
  EngineConfig cfg;
  cfg.block_size = opts.block_size;
  cfg.num_blocks = static_cast<int32_t>((total + opts.block_size - 1) / opts.block_size);
  cfg.kv_type = opts.kv_type;
  cfg.max_seq_len = static_cast<int32_t>(context);
  cfg.scheduler.max_batched_tokens = opts.max_batch;
  cfg.scheduler.max_num_seqs = 1;
  Engine engine(model_, tokenizer_, pool_, cfg);

  Request req;
  req.prompt = prompt_ids;
  req.sampling = opts.sampling;
  req.max_tokens = opts.max_tokens;
  req.ignore_eos = opts.ignore_eos;
  GenerateResult res;
  res.prompt_ids = prompt_ids;
  double t_first = 0;
  const double t0 = now_seconds();
  engine.submit(req, [&](const SeqEvent& ev) {
    if (ev.token >= 0) {
      if (res.output_ids.empty()) t_first = now_seconds();
      res.output_ids.push_back(ev.token);
    }
    res.text += ev.text;
    if (on_token && (ev.token >= 0 || !ev.text.empty())) on_token(ev.token, ev.text);
    if (ev.finished) res.stop_reason = ev.finish_reason == "stop" ? "eos" : ev.finish_reason;
  });
  while (engine.has_work()) engine.step();
  const double t_end = now_seconds();
  res.prefill_seconds = (res.output_ids.empty() ? t_end : t_first) - t0;
  res.decode_seconds = res.output_ids.empty() ? 0 : t_end - t_first;
  if (res.stop_reason == "length" && static_cast<int64_t>(res.output_ids.size()) < opts.max_tokens)
    res.stop_reason = "context";
  return res;
}

}  // namespace pagellm
