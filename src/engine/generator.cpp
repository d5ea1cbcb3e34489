#include "engine/generator.h"

#include <fmt/format.h>

#include <chrono>

#include "kvcache/block_allocator.h"
#include "kvcache/block_table.h"
#include "kvcache/kv_pool.h"
#include "tokenizer/detokenizer.h"
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
  if (opts.block_size <= 0 || opts.max_batch <= 0)
    throw ConfigError("block size and batch must be positive");
  if (prompt_ids.empty()) throw ConfigError("the prompt is empty (no tokens to start from)");
  const int64_t n_prompt = static_cast<int64_t>(prompt_ids.size());
  if (n_prompt >= context)
    throw ConfigError(
        fmt::format("the prompt is {} tokens, which does not fit the context of {} "
                    "tokens (leave room for at least one generated token; raise -c)",
                    n_prompt, context));
  for (int32_t id : prompt_ids)
    if (id < 0 || id >= hp.n_vocab)
      throw ConfigError(
          fmt::format("prompt token id {} is outside the vocabulary (0..{})", id, hp.n_vocab - 1));
  const int64_t total = std::min<int64_t>(context, n_prompt + opts.max_tokens);
  const int32_t n_blocks = static_cast<int32_t>((total + opts.block_size - 1) / opts.block_size);
  BlockAllocator alloc(n_blocks);
  KvPool kv(model_.kv_shape(n_blocks, opts.block_size, opts.kv_type));
  BlockTable table(opts.block_size);
  if (!table.reserve(alloc, total)) throw Error("internal: KV reservation failed");

  Sampler sampler(opts.sampling);
  StreamingDetokenizer detok(tokenizer_);
  GenerateResult res;
  res.prompt_ids = prompt_ids;
  std::vector<float> logits;
  std::vector<int32_t> history = prompt_ids;
  Batch batch;

  const double t0 = now_seconds();
  for (int64_t begin = 0; begin < n_prompt; begin += opts.max_batch) {
    const int64_t end = std::min<int64_t>(n_prompt, begin + opts.max_batch);
    batch.clear();
    const int32_t s = batch.add_sequence(table);
    for (int64_t i = begin; i < end; ++i)
      batch.add_token(s, prompt_ids[static_cast<size_t>(i)], static_cast<int32_t>(i),
                      i + 1 == n_prompt);
    model_.forward(batch, kv, pool_, logits);
  }
  const double t1 = now_seconds();
  res.prefill_seconds = t1 - t0;

  res.stop_reason = "length";
  int64_t pos = n_prompt;
  for (int32_t i = 0; i < opts.max_tokens; ++i) {
    const int32_t id = sampler.sample(logits.data(), hp.n_vocab, history);
    res.output_ids.push_back(id);
    history.push_back(id);
    const bool eog = tokenizer_.is_eog(id) && !opts.ignore_eos;
    std::string piece = eog ? std::string() : detok.push(id);
    res.text += piece;
    if (on_token) on_token(id, piece);
    if (eog) {
      res.stop_reason = "eos";
      break;
    }
    if (i + 1 == opts.max_tokens) break;
    if (pos >= total) {
      res.stop_reason = "context";
      break;
    }
    batch.clear();
    const int32_t s = batch.add_sequence(table);
    batch.add_token(s, id, static_cast<int32_t>(pos++), true);
    model_.forward(batch, kv, pool_, logits);
  }
  std::string rest = detok.flush();
  if (!rest.empty()) {
    res.text += rest;
    if (on_token) on_token(-1, rest);
  }
  res.decode_seconds = now_seconds() - t1;
  table.release(alloc);
  return res;
}

}  // namespace pagellm
