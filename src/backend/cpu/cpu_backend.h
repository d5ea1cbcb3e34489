// The Backend (backend/backend.h) of the host CPU and of virtual CPU devices:
// the kernels of this folder on the engine's thread pool, memory in host RAM.
//
// A staged CPU backend keeps its memory apart from the model's host memory,
// as a GPU would: weights are copied into it at load, hidden states and
// logits are copied in and out. The kernels and results are the same; it lets
// tests run the model's device paths without a GPU.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"

namespace pagellm::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(ThreadPool* pool = nullptr, bool staged = false);
  ~CpuBackend() override;

  std::string name() const override { return staged_ ? "cpu (staged)" : "cpu"; }
  bool uses_host_memory() const override { return !staged_; }
  void set_thread_pool(ThreadPool* pool) override { pool_ = pool; }

  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) noexcept override;
  // Elastic ranges in host pages (util/host_pages.h): commit populates,
  // decommit is MADV_DONTNEED, so a staged device's KV pool really gives
  // chunks back, as a GPU's does.
  void* reserve_range(size_t bytes) override;
  bool commit_range(void* p, size_t bytes) override;
  void decommit_range(void* p, size_t bytes) noexcept override;
  void release_range(void* p, size_t bytes) noexcept override;
  // Bytes this backend holds now: allocate()'s and committed ranges' (what
  // a GPU's memory probe would see it take).
  size_t held_bytes() const { return held_.load(std::memory_order_relaxed); }
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  MemoryBandwidth measure_host_bandwidth(bool read_only) override;
  // Rows16 for the packable types (n_in a multiple of 32; a stack whose
  // parts are whole groups), packed in parallel; other matrices stay as they are.
  MatrixView prepare_weights(const MatrixView& m, int64_t stack_rows,
                             const std::function<void*(size_t)>& alloc,
                             ThreadPool& pool) const override;

  using Backend::begin_step;
  void begin_step(const StepInputs& in, std::span<const RopeParams> ropes) override;
  using Backend::matmul;
  void matmul(const float* x, int64_t rows, const MatmulOutput* outs, size_t n_outs) override;
  void matmul_groups(const float* x, int64_t rows, const MatrixView* ws, int64_t groups,
                     float* y) override;
  // Quantized weights: each row is normalized (or gate and up combined) by
  // the worker that quantizes it (RowTransform), never written out; float
  // weights take the default path. Epilogues run in the threads that
  // computed the rows (matmul_many).
  using Backend::norm_matmul;
  void norm_matmul(const float* x, const float* norm, float eps, float* h, int64_t rows,
                   const MatmulOutput* outs, size_t n_outs) override;
  using Backend::silu_mul_matmul;
  void silu_mul_matmul(float* gate, const float* up, int64_t rows, const MatmulOutput* outs,
                       size_t n_outs) override;
  using Backend::glu_matmul;
  void glu_matmul(Activation act, float* gate, const float* up, int64_t rows,
                  const MatmulOutput* outs, size_t n_outs) override;
  void reserve_matmul(const MatrixView& w, int64_t rows) override;
  void rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t n,
                float eps) override;
  void add_inplace(float* x, const float* y, int64_t count) override;
  void add_bias(float* x, const float* bias, int64_t rows, int64_t n, int64_t stride) override;
  void silu_mul(float* gate, const float* up, int64_t count) override;
  void glu(Activation act, float* gate, const float* up, int64_t count) override;
  using Backend::rope;
  void rope(float* x, int64_t stride, int32_t n_heads, int32_t head_dim, RopeStyle style,
            int32_t table) override;
  void kv_write(const KvLayerView& kv, const float* k, const float* v) override;
  void gather_rows(const float* x, int64_t n, const int32_t* rows, int64_t count,
                   float* out) override;
  void combine_rows(const float* y, int64_t n, const int32_t* rows, const float* weights,
                    int64_t n_tokens, int32_t k, float* out, bool add) override;
  void paged_attention(const KvLayerView& kv, const float* q, float* out, int32_t n_heads,
                       float scale) override;
  bool mla_plain_form() const override { return true; }
  void kv_read(const KvLayerView& kv, int32_t seq, int32_t first, int32_t count, int32_t col,
               int32_t n, float* out) override;
  void attention_rows(const float* q, const float* k, const float* v, float* out, int32_t n_tokens,
                      const int32_t* positions, int32_t n_heads, int32_t n_kv_heads,
                      int32_t head_dim, float scale) override;
  void paged_attention_tokens(const KvLayerView& kv, const float* q, float* out, int32_t n_heads,
                              float scale, int32_t n, const int32_t* tokens) override;
  void ssm_conv(const SsmConvArgs& args, const RecurrentBatch& batch) override;
  void gated_delta_rule(const GatedDeltaArgs& args, const RecurrentBatch& batch) override;

 private:
  ThreadPool& pool();

  ThreadPool* pool_;
  bool staged_;
  std::atomic<size_t> held_{0};
  StepInputs step_;
  const RopeCache& rope_table(int32_t table) const;
  // attention_rows: its block table (block b = positions of block b) and
  // token sequences; paged_attention_tokens: the tokens' sequences and positions.
  std::vector<int32_t> rows_table_, rows_seq_, rows_pos_;

  std::vector<std::unique_ptr<RopeCache>> ropes_;
  std::vector<RopeParams> rope_params_;
  // Matmul scratch per activation format (dot type, weight layout): matrices
  // that read the same input share one quantization of it.
  using Format = std::pair<DType, WeightLayout>;
  std::map<Format, MatmulScratch> scratch_;
  std::vector<std::pair<Format, ActivationRows>> prepared_;
  std::vector<MatmulJob> jobs_;
  std::vector<ActivationRows> group_acts_;  // matmul_groups' per-group rows
  // The outputs' epilogues (bias, residual add) for the jobs: what they run on.
  struct OutputEpilogue {
    const float* bias;
    float* add_to;
  };
  std::vector<OutputEpilogue> epilogue_args_;
  std::vector<MatmulEpilogue> epilogues_;
  static void run_epilogue(const void* ctx, float* y, int64_t y_stride, int64_t x_rows, int64_t r0,
                           int64_t r1);
  void run_prepared(const float* x, int64_t rows, const MatmulOutput* outs, size_t n_outs,
                    const RowTransform* transform);
};

}  // namespace pagellm::cpu
