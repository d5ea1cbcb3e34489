// Speculative decoding with a draft model: a second, smaller model of the
// same vocabulary that proposes each decoding sequence's next tokens greedily.
// It keeps its own paged KV cache (block tables per sequence, rolled back to
// the part of its tokens that the target kept), so a step costs it one
// batched catch-up pass over what the target accepted and k - 1 one-token
// passes. Sequences it has no room for are not drafted for (the least
// recently drafted ones are evicted first).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "engine/kv_runtime.h"
#include "engine/speculation.h"
#include "model/runner.h"
#include "util/thread_pool.h"

namespace pagellm {

struct DraftModelConfig {
  int32_t num_blocks = 0;  // its KV cache, in blocks
  int32_t block_size = 16;
  DType kv_type = DType::F16;
  int32_t max_batched_tokens = 512;  // per catch-up pass
  int32_t max_seqs = 4;              // sequences drafted for in one step
};

class DraftModelProposer final : public DraftProposer {
 public:
  // Throws ConfigError when the vocabularies differ in size.
  DraftModelProposer(std::unique_ptr<ModelRunner> model, ThreadPool& pool, DraftModelConfig config,
                     int32_t target_n_vocab);
  ~DraftModelProposer() override;

  void propose(std::span<const DraftWant> wants) override;
  void release(uint64_t seq_id) override;

  const ModelRunner& model() const { return *model_; }
  // Blocks its sequences hold (tests: none once every sequence is released).
  int32_t blocks_in_use() const { return kv_->manager().allocator().num_used(); }

 private:
  struct DraftSeq {
    explicit DraftSeq(int32_t block_size) : blocks(block_size) {}
    BlockTable blocks;
    std::vector<int32_t> cached;  // tokens whose K/V is in its cache
    uint64_t last_used = 0;
  };
  struct Active {
    DraftSeq* seq;
    const DraftWant* want;
  };
  // Room for positions [from, to) of `d`, evicting idle sequences if needed.
  bool make_room(DraftSeq& d, int64_t from, int64_t to, std::span<const DraftWant> wants);
  void run(std::vector<Active>& active);

  std::unique_ptr<ModelRunner> model_;
  ThreadPool& pool_;
  DraftModelConfig config_;
  std::unique_ptr<KvRuntime> kv_;
  std::map<uint64_t, DraftSeq> seqs_;
  uint64_t clock_ = 0;
  Batch batch_;
};

}  // namespace pagellm
