#include "engine/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/kv_runtime.h"
#include "kvcache/block_table.h"
#include "model/batch.h"
#include "util/error.h"

namespace pagellm {

double token_nll(const float* logits, int64_t n_vocab, int32_t target) {
  double mx = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return std::log(sum) + mx - static_cast<double>(logits[target]);
}

PerplexityResult perplexity(ModelRunner& model, const std::vector<int32_t>& tokens,
                            const PerplexityOptions& opts, ThreadPool& pool,
                            const PerplexityProgress& progress) {
  const int32_t n_ctx = opts.n_ctx;
  if (n_ctx < 4) throw ConfigError(fmt::format("the perplexity context must be >= 4 (got {})", n_ctx));
  if (opts.batch < 1) throw ConfigError(fmt::format("the batch must be >= 1 (got {})", opts.batch));
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < 2 * static_cast<int64_t>(n_ctx))
    throw ConfigError(fmt::format(
        "the text is {} tokens; perplexity needs at least 2 x the context ({} tokens): use a "
        "longer text or a smaller -c",
        n_tokens, 2 * static_cast<int64_t>(n_ctx)));
  const int32_t windows = static_cast<int32_t>(n_tokens / n_ctx);
  const int32_t first = n_ctx / 2;
  const int64_t V = model.hparams().n_vocab;

  const int32_t bs = opts.block_size;
  const int32_t batch = std::min(opts.batch, n_ctx);
  // One window's blocks in one group of every layer; no prefix cache.
  KvRuntimeConfig kc;
  kc.groups = {{CacheGroupSpec::Kind::kPagedKv, 0, (n_ctx + bs - 1) / bs}};
  kc.block_size = bs;
  kc.kv_type = opts.kv_type;
  kc.prefix_caching = false;
  kc.workspace_tokens = batch;
  kc.workspace_rows = batch;
  KvRuntime kv(model, kc);
  BlockAllocator& alloc = kv.manager().allocator();

  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::vector<float> logits;
  Batch b;
  for (int32_t w = 0; w < windows; ++w) {
    const int64_t start = static_cast<int64_t>(w) * n_ctx;
    BlockTable table(bs);
    if (!table.reserve(alloc, n_ctx)) throw Error("perplexity: the window's KV blocks are not free");
    for (int32_t p0 = 0; p0 < n_ctx; p0 += batch) {
      const int32_t p1 = std::min(n_ctx, p0 + batch);
      b.clear();
      const int32_t s = b.add_sequence(table);
      for (int32_t p = p0; p < p1; ++p) {
        int32_t id = tokens[static_cast<size_t>(start + p)];
        if (p == 0 && opts.bos >= 0) id = opts.bos;
        b.add_token(s, id, p, p >= first && p < n_ctx - 1);
      }
      model.forward(b, kv.storage(), pool, logits);
      // Rows come in token order: positions max(p0, first) .. min(p1, n_ctx - 1) - 1.
      int64_t row = 0;
      for (int32_t p = std::max(p0, first); p < std::min(p1, n_ctx - 1); ++p, ++row) {
        const double v = token_nll(logits.data() + row * V, V, tokens[static_cast<size_t>(start + p + 1)]);
        nll += v;
        nll2 += v * v;
        ++count;
      }
    }
    table.release(alloc);
    if (progress) progress(w + 1, windows, std::exp(nll / static_cast<double>(count)));
  }
  PerplexityResult r;
  r.windows = windows;
  r.tokens = count;
  r.mean_nll = nll / static_cast<double>(count);
  r.ppl = std::exp(r.mean_nll);
  const double var = nll2 / static_cast<double>(count) - r.mean_nll * r.mean_nll;
  r.ppl_stderr = var > 0 && count > 1 ? r.ppl * std::sqrt(var / static_cast<double>(count - 1)) : 0;
  return r;
}

}  // namespace pagellm
