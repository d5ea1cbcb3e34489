#include "model/make_model.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tensor/convert.h"
#include "util/error.h"

namespace pagellm {

namespace {

// SplitMix64: a small, fast, well-mixed generator; one stream per chunk of
// rows so the output does not depend on the thread count.
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() {
    return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
};

// Fills x with mean + std * N(0,1) (Box-Muller).
void fill_normal(SplitMix& rng, float* x, int64_t n, float mean, float std) {
  for (int64_t i = 0; i < n; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(rng.uniform()));
    const double th = 2.0 * M_PI * rng.uniform();
    x[i] = mean + std * static_cast<float>(r * std::cos(th));
    if (i + 1 < n) x[i + 1] = mean + std * static_cast<float>(r * std::sin(th));
  }
}

uint64_t stream_seed(uint64_t seed, uint64_t tensor, uint64_t row) {
  SplitMix m{seed ^ (tensor * 0x100000001b3ull) ^ (row * 0xc2b2ae3d27d4eb4full)};
  return m.next();
}

}  // namespace

void make_model(const MakeModelSpec& s, const std::string& path, ThreadPool& pool) {
  if (s.arch != "llama" && s.arch != "qwen2")
    throw ConfigError(fmt::format("unknown architecture '{}' (expected llama or qwen2)", s.arch));
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_ff <= 0 ||
      s.n_ctx <= 0)
    throw ConfigError("model dimensions must be positive");
  if (s.n_embd % s.n_head != 0)
    throw ConfigError(fmt::format("n_embd {} is not a multiple of n_head {}", s.n_embd, s.n_head));
  if (s.n_head % s.n_head_kv != 0)
    throw ConfigError(
        fmt::format("n_head {} is not a multiple of n_head_kv {}", s.n_head, s.n_head_kv));
  if ((s.n_embd / s.n_head) % 2 != 0) throw ConfigError("head size must be even (RoPE pairs)");
  const auto& tr = dtype_traits(s.type);
  if (!tr.can_quantize || s.type == DType::Q8_K || s.type == DType::Q8_1)
    throw ConfigError(fmt::format("cannot write weights of type '{}'", tr.name));
  for (int64_t n : {int64_t{s.n_embd}, int64_t{s.n_ff}})
    if (n % tr.block_size != 0)
      throw ConfigError(fmt::format("row length {} is not a multiple of the {} block size {}", n,
                                    tr.name, tr.block_size));
  if (s.vocab_from.empty()) throw ConfigError("make-model needs a vocabulary file (--vocab-from)");
  auto vocab = GgufFile::open(s.vocab_from);
  const GgufValue* tokens = vocab->find("tokenizer.ggml.tokens");
  if (!tokens) throw ConfigError(fmt::format("'{}' has no tokenizer.ggml.tokens", s.vocab_from));
  const int64_t n_vocab = static_cast<int64_t>(tokens->as_array("tokenizer.ggml.tokens").size());
  if (n_vocab == 0) throw ConfigError(fmt::format("'{}' has an empty vocabulary", s.vocab_from));

  const std::string a = s.arch + ".";
  const int64_t E = s.n_embd, KV = s.n_embd / s.n_head * s.n_head_kv, F = s.n_ff;
  GgufWriter w;
  w.set("general.architecture", GgufValue::str(s.arch));
  w.set("general.name", GgufValue::str(fmt::format("pagellm random {} {}", s.arch, tr.name)));
  w.set(a + "context_length", GgufValue::u32(static_cast<uint32_t>(s.n_ctx)));
  w.set(a + "embedding_length", GgufValue::u32(static_cast<uint32_t>(E)));
  w.set(a + "block_count", GgufValue::u32(static_cast<uint32_t>(s.n_layer)));
  w.set(a + "feed_forward_length", GgufValue::u32(static_cast<uint32_t>(F)));
  w.set(a + "attention.head_count", GgufValue::u32(static_cast<uint32_t>(s.n_head)));
  w.set(a + "attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(s.n_head_kv)));
  w.set(a + "rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(E / s.n_head)));
  w.set(a + "rope.freq_base", GgufValue::f32(s.rope_freq_base));
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(s.rms_eps));
  for (const auto& kv : vocab->metadata())
    if (kv.key.rfind("tokenizer.", 0) == 0) w.set(kv.key, kv.value);

  uint64_t tensor_index = 0;
  auto matrix = [&](const std::string& name, int64_t n_in, int64_t n_out) {
    const uint64_t ti = tensor_index++;
    const DType type = s.type;
    const uint64_t seed = s.seed;
    w.add_tensor(
        name, type, {n_in, n_out}, [&pool, type, seed, ti, n_in, n_out](uint8_t* dst, size_t) {
          const size_t row_bytes = dtype_row_bytes(type, n_in);
          pool.parallel_for(n_out, [&](int64_t b, int64_t e, int) {
            std::vector<float> row(static_cast<size_t>(n_in));
            for (int64_t r = b; r < e; ++r) {
              SplitMix rng{stream_seed(seed, ti, static_cast<uint64_t>(r))};
              fill_normal(rng, row.data(), n_in, 0.0f, 0.02f);
              quantize_row(type, row.data(), dst + static_cast<size_t>(r) * row_bytes, n_in);
            }
          });
        });
  };
  auto vec = [&](const std::string& name, int64_t n, float mean) {
    const uint64_t ti = tensor_index++;
    const uint64_t seed = s.seed;
    w.add_tensor(name, DType::F32, {n}, [seed, ti, n, mean](uint8_t* dst, size_t) {
      SplitMix rng{stream_seed(seed, ti, 0)};
      fill_normal(rng, reinterpret_cast<float*>(dst), n, mean, 0.02f);
    });
  };

  matrix("token_embd.weight", E, n_vocab);
  vec("output_norm.weight", E, 1.0f);
  if (!s.tied) matrix("output.weight", E, n_vocab);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    vec(p + "attn_norm.weight", E, 1.0f);
    matrix(p + "attn_q.weight", E, E);
    if (s.arch == "qwen2") vec(p + "attn_q.bias", E, 0.0f);
    matrix(p + "attn_k.weight", E, KV);
    if (s.arch == "qwen2") vec(p + "attn_k.bias", KV, 0.0f);
    matrix(p + "attn_v.weight", E, KV);
    if (s.arch == "qwen2") vec(p + "attn_v.bias", KV, 0.0f);
    matrix(p + "attn_output.weight", E, E);
    vec(p + "ffn_norm.weight", E, 1.0f);
    matrix(p + "ffn_gate.weight", E, F);
    matrix(p + "ffn_up.weight", E, F);
    matrix(p + "ffn_down.weight", F, E);
  }
  w.write_file(path);
}

}  // namespace pagellm
