// The Backend (backend/backend.h) of one CUDA GPU, or of one part of a GPU
// split into virtual devices (each part is its own CudaBackend on the same
// GPU, with its own stream). Kernels: this folder's; weights stay in their
// GGUF layout in device memory. Matrix products: for up to kGemvMaxRows
// activation rows (decode batches), a GEMV, weights read once per 16 rows:
// gemv_q8.h over int8 activations (dp4a, as the CPU's dot products) for the
// types it takes, gemv.h over f32 activations for the others (for all with
// PAGELLM_CUDA_GEMV=f32); up to kMmqMaxRows (large decode batches, short
// prompts), the same types through the int8 tensor-core product (mmq.h;
// PAGELLM_CUDA_MMQ=0 sends them to cuBLAS); above, and for the other types,
// dequantize + cuBLAS (gemm.h; f16 inputs). Up to kMmqMaxRows, a sequence's
// bits do not depend on the rest of the batch within each path.
// Kernels are dependent launches on Hopper (pdl.h; PAGELLM_CUDA_PDL=0 turns
// that off). PAGELLM_CUDA_PROFILE=1 times each operation (op_profile.h) and prints the
// table on stderr when the backend goes.
// Every failure throws CudaError naming the call and the device.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kv_write.h"
#include "backend/cuda/layer_graphs.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/vmm_ranges.h"

namespace pagellm::cuda {

class OpProfile;

class CudaBackend final : public Backend {
 public:
  // Where the GEMV's f32 FMAs (n x the weights per step) overtake expanding
  // the weights to f16 for cuBLAS's tensor cores (a fixed ~4.6 bytes of
  // traffic per weight): on an H100/H200, about 32 rows (an 8B model: ~10 ms
  // either way). Up to it, a sequence's decode bits do not depend on the batch.
  static constexpr int64_t kGemvMaxRows = 32;
  // Where cuBLAS over the weights expanded to f16 takes over from the int8
  // tensor-core product: its weights are read once per 64 rows and its
  // per-block scaling costs a few instructions per row and block; cuBLAS's
  // fixed expansion (~4.6 bytes per weight) pays off for long prompts.
  static constexpr int64_t kMmqMaxRows = 128;

  // Throws CudaError when GPU `index` is not there or cannot be initialised.
  // `label` names it in messages ("cuda:0.1" for a part of a split GPU;
  // default "cuda:<index>").
  explicit CudaBackend(int index, const std::string& label = {});
  ~CudaBackend() override;

  std::string name() const override { return name_; }
  bool uses_host_memory() const override { return false; }
  const CudaDevice& device() const { return dev_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) noexcept override;
  // Pinned (page-locked, portable) host memory: downloads into it are DMA
  // copies, about twice as fast as into pageable memory.
  void* allocate_host(size_t bytes) override;
  void free_host(void* p, size_t bytes) noexcept override;
  // Elastic KV pools (vmm_ranges.h): physical granules mapped into one
  // reserved range. Null from reserve_range (the pool stays whole) where the
  // GPU or driver has no VMM, or with PAGELLM_CUDA_VMM=0.
  void* reserve_range(size_t bytes) override;
  bool commit_range(void* p, size_t bytes) override;
  void decommit_range(void* p, size_t bytes) noexcept override;
  void release_range(void* p, size_t bytes) noexcept override;
  size_t elastic_granularity() const override;
  // Device memory mapped into elastic ranges now.
  size_t elastic_mapped_bytes() const { return vmm_->mapped_bytes(); }
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_to(Backend& to, void* dst, const void* src, size_t bytes) override;
  void synchronize() override { dev_.synchronize(); }
  double measure_read_bandwidth() override;

  using Backend::begin_step;
  // RoPE tables without frequency factors (a ConfigError names them).
  void begin_step(const StepInputs& in, std::span<const RopeParams> ropes) override;
  // Not yet: GELU, sliding windows, soft caps, RoPE frequency factors.
  // Decode steps (up to kGemvMaxRows tokens, or up to kMmqMaxRows while
  // every product of that size has run on the int8 kernels) are recorded as
  // CUDA graphs (layer_graphs.h); PAGELLM_CUDA_GRAPHS=0 turns that off.
  LayerRun begin_layers(int32_t begin, int32_t end) override;
  bool end_layers() override;
  void cancel_layers() noexcept override;
  const LayerGraphs& graphs() const { return graphs_; }
  using Backend::matmul;
  void matmul(const float* x, int64_t rows, const MatmulOutput* outs, size_t n_outs) override;
  using Backend::norm_matmul;
  void norm_matmul(const float* x, const float* norm, float eps, float* h, int64_t rows,
                   const MatmulOutput* outs, size_t n_outs) override;
  using Backend::silu_mul_matmul;
  void silu_mul_matmul(float* gate, const float* up, int64_t rows, const MatmulOutput* outs,
                       size_t n_outs) override;
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
  // One launch: q rotated in place, k rotated on its way to the cache.
  using Backend::rope_kv_write;
  void rope_kv_write(const KvLayerView& kv, float* q, int32_t n_heads, float* k, const float* v,
                     RopeStyle style, int32_t table) override;
  void paged_attention(const KvLayerView& kv, const float* q, float* out, int32_t n_heads,
                       float scale) override;
  // Mixture of experts: the host's index and weight arrays are uploaded first.
  void gather_rows(const float* x, int64_t n, const int32_t* rows, int64_t count,
                   float* out) override;
  void combine_rows(const float* y, int64_t n, const int32_t* rows, const float* weights,
                    int64_t n_tokens, int32_t k, float* out, bool add) override;
  // Decode: the attention kernel also writes its output as the int8 input of
  // the projection's GEMV.
  using Backend::attention_matmul;
  void attention_matmul(const KvLayerView& kv, const float* q, float* out, int32_t n_heads,
                        float scale, int64_t rows, const MatmulOutput* outs,
                        size_t n_outs) override;
  // Gated delta-net layers (delta_net.h): the step's RecurrentBatch arrays
  // come with its upload (begin_step), so recorded steps replay them; a
  // batch that is not the step's is uploaded per call (not while recording).
  // Every token takes the one-token recurrent step, which is what
  // RecurrentBatch::step_from asks for positions past it, and gives the
  // prompt's other tokens the chunked form's values to float rounding;
  // first_pos (the chunk alignment) is unused here.
  void ssm_conv(const SsmConvArgs& args, const RecurrentBatch& batch) override;
  void gated_delta_rule(const GatedDeltaArgs& args, const RecurrentBatch& batch) override;

 private:
  // Throws Error for outputs the kernels cannot take.
  void check_outputs(int64_t rows, const MatmulOutput* outs, size_t n_outs) const;
  // Rows up to which the int8 kernels run (0: off).
  int64_t int8_max_rows() const;
  // True when a `type` matrix times `rows` rows runs on the int8 kernels
  // (gemv_q8 or mmq).
  bool uses_int8(DType type, int64_t rows) const;
  // True when every output runs on the int8 kernels at this many rows: the
  // input may then be produced straight into q8_act_ (fused norm / SwiGLU).
  bool int8_inputs(int64_t rows, const MatmulOutput* outs, size_t n_outs) const;
  void* int8_buffer(int64_t rows, int64_t n_in);
  // Grows b to `bytes`; recordings that used its old memory are dropped.
  void grow(DeviceBuffer& b, size_t bytes);
  // Grows b to hold `need` bytes, in powers of two from min_bytes: few moves,
  // so recorded graphs stay valid.
  void grow_pow2(DeviceBuffer& b, size_t need, size_t min_bytes);
  // The products and epilogues of a matmul whose int8 input (if any output
  // needs it) is in q8_act_; x (f32) for the other outputs. The int8 GEMV
  // makes the residual add of outputs without bias or RoPE itself.
  void products(const float* x, int64_t rows, const MatmulOutput* outs, size_t n_outs);
  // The KV write kernel's arguments for this step.
  KvWriteArgs kv_write_args(const KvLayerView& kv, const float* k, const float* v) const;
  // The attention kernel's arguments for this step.
  PagedAttentionArgs attention_args(const KvLayerView& kv, const float* q, float* out,
                                    int32_t n_heads, float scale) const;
  // Paged attention of the step (split over partitions where it is small;
  // its workspace in attn_ws_).
  void attention(const PagedAttentionArgs& a, void* q8_dst);
  // `batch` with its arrays in device memory (the step's copy, or uploaded now).
  RecurrentBatch device_batch(const RecurrentBatch& batch);
  // Lets GPU `peer` read this GPU's memory directly, once per pair.
  void enable_peer_access(int peer);

  CudaDevice dev_;
  std::unique_ptr<VmmRanges> vmm_;
  LayerGraphs graphs_;
  std::set<int> peers_checked_;
  std::string name_;
  bool int8_gemv_;
  bool mmq_;
  // A layer's product between kGemvMaxRows and kMmqMaxRows rows went to
  // cuBLAS, which may allocate inside a capture: such steps are not recorded.
  // (Products outside layer runs, as the output head's, are never recorded.)
  bool cublas_in_int8_range_ = false;
  bool in_layers_ = false;       // between begin_layers and end_layers / cancel_layers
  DeviceBuffer q8_act_;          // int8 activations of a decode matmul (q8_activations.h)
  std::vector<char> fused_add_;  // products(): outputs whose add the GEMV made
  GemmWorkspace gemm_ws_;
  DeviceBuffer attn_ws_;                // partial softmaxes of split attention launches
  std::unique_ptr<OpProfile> profile_;  // PAGELLM_CUDA_PROFILE=1
  const CudaRopeCache& rope_table(int32_t table) const;
  void check_attention(const KvLayerView& kv) const;

  std::vector<std::unique_ptr<CudaRopeCache>> ropes_;
  std::vector<RopeParams> rope_params_;
  // The step's batch on the device, one allocation: positions, token_seq
  // (int32), slots (int64), block tables [n_seqs][table_stride_] (int32).
  std::vector<uint8_t> staging_;
  DeviceBuffer step_buf_;
  DeviceBuffer moe_rows_, moe_weights_;  // gather_rows / combine_rows arguments
  int32_t n_tokens_ = 0;
  int32_t n_seqs_ = 0;
  int32_t table_stride_ = 0;
  const int32_t* d_positions_ = nullptr;
  const int32_t* d_token_seq_ = nullptr;
  // Per KV group (StepInputs::group): slots and block tables.
  std::vector<const int64_t*> d_slots_;
  std::vector<const int32_t*> d_tables_;
  // The step's recurrent batch (StepInputs::recurrent) as given, and its
  // token_begin / state_slot arrays in step_buf_ (null: none this step).
  RecurrentBatch step_recurrent_;
  const int32_t* d_token_begin_ = nullptr;
  const int32_t* d_state_slot_ = nullptr;
  std::vector<int32_t> rec_staging_;  // device_batch()'s per-call upload
  DeviceBuffer rec_buf_;
};

}  // namespace pagellm::cuda
