#include "mpi/step_message.h"

#include <fmt/format.h>

#include <algorithm>

#include <array>
#include <cstring>

#include "util/error.h"

namespace pagellm {

namespace {

constexpr uint32_t kMagic = 0x54534c50;  // "PLST"
constexpr uint32_t kVersion = 2;  // 2: recurrent state slots (state flag 2, MLA prompt ends only, reads as before)

class Writer {
 public:
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void i32s(std::span<const int32_t> v) { raw(v.data(), v.size_bytes()); }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  std::vector<uint8_t> out;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  uint32_t u32(const char* what) {
    uint32_t v;
    take(&v, sizeof v, what);
    return v;
  }
  int32_t i32(const char* what) { return static_cast<int32_t>(u32(what)); }
  // A count of items of `item_bytes` each that must fit in what is left.
  uint32_t count(const char* what, size_t item_bytes, uint64_t max) {
    const uint32_t n = u32(what);
    if (n > max) throw FormatError(fmt::format("step message: {} {} is over the limit {}", what, n, max));
    if (static_cast<uint64_t>(n) * item_bytes > left())
      throw FormatError(fmt::format("step message: {} {} runs past the end", what, n));
    return n;
  }
  void take(void* p, size_t n, const char* what) {
    if (n > left()) throw FormatError(fmt::format("step message: truncated in {}", what));
    if (n == 0) return;  // an empty vector's data() may be null, which memcpy must not get
    std::memcpy(p, b_.data() + pos_, n);
    pos_ += n;
  }
  size_t left() const { return b_.size() - pos_; }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

void header(Writer& w, StepKind kind) {
  w.u32(kMagic);
  w.u32(kVersion);
  w.u32(static_cast<uint32_t>(kind));
}

// The recurrent-state part of a step (after the copies): slots in range,
// one per sequence and distinct, decode starts not negative.
void read_state(Reader& r, const StepLimits& lim, uint32_t S, Batch& batch) {
  const uint32_t flag = r.u32("the state flag");
  if (flag > 2) throw FormatError(fmt::format("step message: state flag {}", flag));
  if (flag == 0) return;
  auto decode_starts = [&] {
    for (uint32_t s = 0; s < S; ++s) {
      const int32_t from = r.i32("a decode start");
      if (from < 0) throw FormatError(fmt::format("step message: decode start {}", from));
      batch.step_from.push_back(from);
    }
  };
  if (flag == 2) return decode_starts();  // MLA: the prompt ends only
  if (lim.state_slots <= 0)
    throw FormatError("step message: recurrent state for a model without recurrent layers");
  auto slot = [&](const char* what) {
    const int32_t s = r.i32(what);
    if (s < 0 || s >= lim.state_slots)
      throw FormatError(fmt::format("step message: state slot {} outside [0, {})", s, lim.state_slots));
    return s;
  };
  for (uint32_t s = 0; s < S; ++s) batch.state_slots.push_back(slot("a state slot"));
  std::vector<int32_t> sorted = batch.state_slots;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw FormatError("step message: two sequences share a state slot");
  decode_starts();
  const uint32_t n_resets = r.count("the state resets", 4, S);
  for (uint32_t i = 0; i < n_resets; ++i) batch.state_resets.push_back(slot("a state reset"));
  for (auto* pairs : {&batch.state_saves, &batch.state_copies}) {
    const uint32_t n = r.count("the state copies", 8, static_cast<uint64_t>(lim.state_slots));
    for (uint32_t i = 0; i < n; ++i) {
      const int32_t src = slot("a state copy"), dst = slot("a state copy");
      if (src == dst) throw FormatError(fmt::format("step message: state copy {} -> itself", src));
      pairs->emplace_back(src, dst);
    }
  }
}

}  // namespace

std::vector<uint8_t> encode_step(const Batch& batch, std::span<const float> hidden,
                                 double compute_s) {
  Writer w;
  header(w, StepKind::kStep);
  w.raw(&compute_s, sizeof compute_s);
  const int32_t G = batch.n_groups();
  w.u32(static_cast<uint32_t>(batch.n_tokens()));
  w.u32(static_cast<uint32_t>(batch.n_seqs()));
  w.u32(static_cast<uint32_t>(G));
  w.u32(static_cast<uint32_t>(batch.logit_tokens.size()));
  w.u32(static_cast<uint32_t>(batch.copies.size()));
  w.i32s(batch.tokens);
  w.i32s(batch.positions);
  w.i32s(batch.token_seq);
  w.i32s(batch.logit_tokens);
  for (int32_t g = 0; g < G; ++g)
    for (const BlockTable* t : batch.block_tables) {
      const auto& blocks = t->blocks(g);
      w.u32(static_cast<uint32_t>(blocks.size()));
      w.i32s(blocks);
    }
  for (const BlockCopy& c : batch.copies) w.i32s(std::array<int32_t, 3>{c.src, c.dst, c.group});
  // Recurrent layers: each sequence's state slot and decode start, the slots
  // to zero and to copy first.
  // MLA without recurrent layers: flag 2, the decode starts alone.
  const bool recurrent = !batch.state_slots.empty();
  w.u32(recurrent ? 1 : batch.step_from.empty() ? 0 : 2);
  if (!recurrent && !batch.step_from.empty()) w.i32s(batch.step_from);
  if (recurrent) {
    w.i32s(batch.state_slots);
    w.i32s(batch.step_from);
    w.u32(static_cast<uint32_t>(batch.state_resets.size()));
    w.i32s(batch.state_resets);
    for (const auto* pairs : {&batch.state_saves, &batch.state_copies}) {
      w.u32(static_cast<uint32_t>(pairs->size()));
      for (const auto& [src, dst] : *pairs) w.i32s(std::array<int32_t, 2>{src, dst});
    }
  }
  w.u32(static_cast<uint32_t>(hidden.size()));
  w.raw(hidden.data(), hidden.size_bytes());
  return std::move(w.out);
}

std::vector<uint8_t> encode_logits(std::span<const float> logits, double compute_s) {
  Writer w;
  header(w, StepKind::kLogits);
  w.raw(&compute_s, sizeof compute_s);
  w.u32(static_cast<uint32_t>(logits.size()));
  w.raw(logits.data(), logits.size_bytes());
  return std::move(w.out);
}

std::vector<uint8_t> encode_control(StepKind kind, std::string_view error) {
  Writer w;
  header(w, kind);
  w.u32(static_cast<uint32_t>(error.size()));
  w.raw(error.data(), error.size());
  return std::move(w.out);
}

void decode_step(std::span<const uint8_t> bytes, const StepLimits& lim, DecodedStep& out,
                 int64_t expect_values) {
  Reader r(bytes);
  if (r.u32("the magic") != kMagic) throw FormatError("step message: bad magic");
  const uint32_t version = r.u32("the version");
  if (version != kVersion)
    throw FormatError(fmt::format("step message: version {}, this build speaks {}", version, kVersion));
  const uint32_t kind = r.u32("the kind");
  out.batch.clear();
  out.tables.clear();
  out.payload.clear();
  out.error.clear();
  out.compute_s = 0;
  auto seconds = [&] {
    r.take(&out.compute_s, sizeof out.compute_s, "the compute time");
    if (!(out.compute_s >= 0 && out.compute_s < 1e9)) throw FormatError("step message: bad compute time");
  };
  auto floats = [&](const char* what, uint64_t max) {
    const uint32_t n = r.count(what, sizeof(float), max);
    out.payload.resize(n);
    r.take(out.payload.data(), static_cast<size_t>(n) * sizeof(float), what);
  };
  switch (static_cast<StepKind>(kind)) {
    case StepKind::kShutdown:
    case StepKind::kError: {
      out.kind = static_cast<StepKind>(kind);
      const uint32_t n = r.count("the error text", 1, 1 << 16);
      out.error.resize(n);
      r.take(out.error.data(), n, "the error text");
      break;
    }
    case StepKind::kLogits: {
      out.kind = StepKind::kLogits;
      seconds();
      floats("logits", static_cast<uint64_t>(lim.max_logit_rows) * static_cast<uint64_t>(lim.n_vocab));
      if (expect_values >= 0 && static_cast<int64_t>(out.payload.size()) != expect_values)
        throw FormatError(fmt::format("step message: {} logits, {} expected", out.payload.size(),
                                      expect_values));
      break;
    }
    case StepKind::kStep: {
      out.kind = StepKind::kStep;
      seconds();
      const uint32_t T = r.u32("the token count"), S = r.u32("the sequence count"),
                     G = r.u32("the group count"), L = r.u32("the logit count"),
                     C = r.u32("the copy count");
      if (T == 0 || T > lim.max_tokens)
        throw FormatError(fmt::format("step message: {} tokens (1..{})", T, lim.max_tokens));
      if (S == 0 || S > T) throw FormatError(fmt::format("step message: {} sequences for {} tokens", S, T));
      if (G != lim.group_blocks.size())
        throw FormatError(fmt::format("step message: {} KV groups, this stage has {}", G,
                                      lim.group_blocks.size()));
      if (L > T || L > lim.max_logit_rows)
        throw FormatError(fmt::format("step message: {} logit rows", L));
      if (static_cast<uint64_t>(4 * T + L) * 4 > r.left())
        throw FormatError("step message: truncated in the token arrays");
      std::vector<int32_t> tokens(T), positions(T), token_seq(T), logits(L);
      r.take(tokens.data(), T * 4, "tokens");
      r.take(positions.data(), T * 4, "positions");
      r.take(token_seq.data(), T * 4, "sequences");
      r.take(logits.data(), L * 4, "logit tokens");
      out.tables.reserve(S);
      for (uint32_t s = 0; s < S; ++s) {
        out.tables.emplace_back(lim.block_size);
        out.tables.back().set_groups(static_cast<int32_t>(G));
      }
      for (uint32_t g = 0; g < G; ++g) {
        const int32_t nb = lim.group_blocks[g];
        for (uint32_t s = 0; s < S; ++s) {
          const uint32_t n = r.count("a block count", 4, static_cast<uint64_t>(nb));
          auto& blocks = out.tables[s].group_blocks(static_cast<int32_t>(g));
          blocks.resize(n);
          r.take(blocks.data(), n * 4, "a block table");
          for (int32_t b : blocks)
            if ((b < 0 || b >= nb) && !(g > 0 && b == BlockTable::kNoBlock))
              throw FormatError(fmt::format("step message: block {} outside group {}'s {} blocks", b,
                                            g, nb));
        }
      }
      const uint32_t copies_max = static_cast<uint32_t>(G) * 2 * T + 16;
      if (C > copies_max) throw FormatError(fmt::format("step message: {} copies", C));
      for (uint32_t i = 0; i < C; ++i) {
        BlockCopy c;
        c.src = r.i32("a copy");
        c.dst = r.i32("a copy");
        c.group = r.i32("a copy");
        if (c.group < 0 || c.group >= static_cast<int32_t>(G) || c.src < 0 || c.dst < 0 ||
            c.src >= lim.group_blocks[static_cast<size_t>(c.group)] ||
            c.dst >= lim.group_blocks[static_cast<size_t>(c.group)] || c.src == c.dst)
          throw FormatError(fmt::format("step message: bad copy {} -> {} in group {}", c.src, c.dst,
                                        c.group));
        out.batch.copies.push_back(c);
      }
      for (uint32_t s = 0; s < S; ++s) out.batch.add_sequence(out.tables[s]);
      for (uint32_t t = 0; t < T; ++t) {
        if (tokens[t] < 0 || tokens[t] >= lim.n_vocab)
          throw FormatError(fmt::format("step message: token id {} outside the vocabulary", tokens[t]));
        if (token_seq[t] < 0 || token_seq[t] >= static_cast<int32_t>(S))
          throw FormatError(fmt::format("step message: token {} of sequence {}", t, token_seq[t]));
        try {
          out.batch.add_token(token_seq[t], tokens[t], positions[t], false);
        } catch (const Error& e) {
          throw FormatError(fmt::format("step message: {}", e.what()));
        }
      }
      for (uint32_t i = 0; i < L; ++i)
        if (logits[i] < 0 || logits[i] >= static_cast<int32_t>(T) || (i > 0 && logits[i] <= logits[i - 1]))
          throw FormatError(fmt::format("step message: logit token {} out of order or range", logits[i]));
      out.batch.logit_tokens = std::move(logits);
      read_state(r, lim, S, out.batch);
      floats("hidden values", static_cast<uint64_t>(T) * static_cast<uint64_t>(lim.n_embd));
      if (out.payload.size() != static_cast<size_t>(T) * static_cast<size_t>(lim.n_embd))
        throw FormatError(fmt::format("step message: {} hidden values for {} tokens of {}",
                                      out.payload.size(), T, lim.n_embd));
      break;
    }
    default:
      throw FormatError(fmt::format("step message: unknown kind {}", kind));
  }
  if (r.left() != 0) throw FormatError(fmt::format("step message: {} bytes past the end", r.left()));
}

}  // namespace pagellm
