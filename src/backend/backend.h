// The kernel interface that one device's layers run through. The model runs
// each layer with the backend of the device that holds it (cpu: the host and
// virtual CPU devices; cuda: a GPU, or a part of one) and hands the hidden
// state from backend to backend where consecutive layers change device.
//
// Memory: every pointer given to an op is in the backend's own memory (from
// allocate(); weights uploaded there), except StepInputs, which are host
// memory. Tensors are row-major f32, `rows` rows of `n` floats.
// Ordering: ops run in the order they are called; download() and copy_to()
// return once the data is there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>

#include "backend/activation.h"
#include "backend/attention_args.h"
#include "backend/matrix_view.h"
#include "backend/recurrent_args.h"
#include "backend/rope_style.h"
#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace pagellm {

// Weight matrices (MatrixView, backend/matrix_view.h) are in a backend's
// memory, in the file's layout or one that the backend chose for them at load
// (prepare_weights: the CPU backend's Rows16).

// One product y = x W^T, then, on its rows, in this order (the epilogue):
//   y row += bias                                        (as add_bias)
//   add_to row += y row                                  (as add_inplace: the
//                                                         residual stream)
// The CPU backend runs the epilogue in the product's threads while the rows
// are in cache; CUDA in the product's kernel where it can, otherwise once
// after the product, as finish_outputs() does.
struct MatmulOutput {
  const MatrixView* w;
  float* y;                     // [rows][w->n_out]
  const float* bias = nullptr;  // [w->n_out]
  float* add_to = nullptr;      // [rows][w->n_out]; nullptr: no add
};

// One step's batch, in host memory; valid from begin_step() to the next one.
struct StepInputs {
  int32_t n_tokens = 0;
  int32_t n_seqs = 0;
  const int32_t* positions = nullptr;            // [n_tokens]
  const int32_t* token_seq = nullptr;            // [n_tokens] sequence of each token
  const int64_t* slots = nullptr;                // [n_tokens] cache slot of each token's K/V
  const int32_t* const* block_tables = nullptr;  // [n_seqs] block ids in position order
  const int32_t* block_counts = nullptr;         // [n_seqs] entries in each block table
  // KV groups 1.. (kvcache/kv_group.h): the same three arrays for each.
  struct Group {
    const int64_t* slots = nullptr;
    const int32_t* const* block_tables = nullptr;
    const int32_t* block_counts = nullptr;
  };
  std::span<const Group> more_groups;
  // Models with recurrent layers: the step's batch of their ops (the same
  // object ssm_conv / gated_delta_rule get), so a device backend can upload
  // its arrays with the step's, outside any recorded layer run; else null.
  const RecurrentBatch* recurrent = nullptr;
  Group group(int32_t g) const {
    return g == 0 ? Group{slots, block_tables, block_counts}
                  : more_groups[static_cast<size_t>(g - 1)];
  }
};

// One RoPE table: angle = pos * freq_scale * freq_base^(-2i / n_rot) /
// freq_factors[i] (when given: host memory, n_rot / 2 floats, valid while the
// model lives), cos and sin times attn_factor. A model may use several (Gemma
// 3's local and global layers); each layer names its table by index.
struct RopeParams {
  int32_t n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;
  float attn_factor = 1.0f;
  // Equal parameters share one table of sines and cosines.
  bool operator==(const RopeParams&) const = default;
};

// One layer's K and V in a KV pool on this backend (kvcache/kv_pool.h layout:
// [slots][n_kv_heads][head_dim] of type).
// How the layer attends to it: `window` > 0 limits each token to the last
// `window` positions (itself included; sliding-window layers), `softcap` > 0
// caps scores as softcap * tanh(score / softcap) (Gemma 2).
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  DType type = DType::F16;
  int32_t block_size = 16;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t window = 0;
  float softcap = 0.0f;
  // The KV group whose slots and block tables address it (StepInputs).
  int32_t group = 0;
  // > 0: a latent cache (MLA): only K rows are stored (v == k) and a
  // position's value is the first v_dim elements of its K row; kv_write
  // ignores v, attention's out rows are n_heads * v_dim.
  int32_t v_dim = 0;
  // Per query head sink logits ([n_heads] f32 in this backend's memory, null:
  // none): attention_args.h's `sinks` (gpt-oss).
  const float* sinks = nullptr;
};

// A memory bandwidth probe's figures in bytes/s (0: not measured): every
// thread summing its share of one buffer (read), and a[i] = b[i] + s * c[i]
// counted as 3 x 8 bytes per element as STREAM does (triad).
struct MemoryBandwidth {
  double read_bytes_per_s = 0;
  double triad_bytes_per_s = 0;
};

// Ops beyond the Llama block's that a backend may lack (its layers then stay
// elsewhere: the model refuses to load them there).
enum class BackendOp {
  kGeluTanh,          // glu() with Activation::kGeluTanh
  kAttentionWindow,   // KvLayerView::window
  kAttentionSoftcap,  // KvLayerView::softcap
  kRopeFactors,       // RopeParams::freq_factors / attn_factor
  kMixtureOfExperts,  // routed expert FFNs (gather_rows, combine_rows, per-expert matmuls)
  kRecurrentState,    // gated delta-net layers (ssm_conv, gated_delta_rule)
  kSigmoidGate,       // glu() with Activation::kSigmoid (gated attention output)
  kLatentAttention,   // KvLayerView::v_dim (MLA's latent cache)
  kPerLayerInputs,    // Gemma 4's layers: per-layer inputs, shared KV, unweighted v norm
  kClampedSwiglu,     // glu() with Activation::kSwigluClamped (gpt-oss)
};
const char* backend_op_name(BackendOp op);

class Backend {
 public:
  virtual ~Backend() = default;

  // Whether this backend's kernels run `op`.
  virtual bool supports(BackendOp /*op*/) const { return true; }

  // "cpu", "cuda:0 (NVIDIA H200)": for messages.
  virtual std::string name() const = 0;
  // Pointers into this backend's memory are host pointers the model may
  // read and write directly (weights used in place, logits written in place).
  virtual bool uses_host_memory() const = 0;
  // The CPU thread pool for the next ops (the CPU backend's workers).
  virtual void set_thread_pool(ThreadPool* /*pool*/) {}

  // Zero-filled memory; throws SystemError (or the backend's error) when it
  // cannot be had. deallocate() takes what allocate() gave, with its size.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) noexcept = 0;
  // Zero-filled host memory that download() fills fastest (CUDA: pinned,
  // so copies go straight by DMA); the default is plain host pages.
  // free_host() takes what allocate_host() gave, with its size.
  virtual void* allocate_host(size_t bytes);
  virtual void free_host(void* p, size_t bytes) noexcept;
  // Elastic memory (the KV pool that gives chunks back, kvcache/elastic_pool.h):
  // reserve_range() reserves `bytes` of this backend's address space without
  // memory behind it (null: this backend cannot, its pools stay whole);
  // commit_range() backs [p, p + bytes) with zeroed memory (rounded out to
  // whole units of elastic_granularity(); false when the memory cannot be
  // had), decommit_range() gives back what nothing else committed (a unit
  // shared with a committed neighbour stays); release_range() takes what
  // reserve_range() gave, with its size.
  virtual void* reserve_range(size_t /*bytes*/) { return nullptr; }
  virtual bool commit_range(void* /*p*/, size_t /*bytes*/) { return false; }
  virtual void decommit_range(void* /*p*/, size_t /*bytes*/) noexcept {}
  virtual void release_range(void* /*p*/, size_t /*bytes*/) noexcept {}
  virtual size_t elastic_granularity() const { return 4096; }
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // within this backend
  // Copies into another backend's memory (the pipeline's hand-over). The
  // default stages through host memory.
  virtual void copy_to(Backend& to, void* dst, const void* src, size_t bytes);
  // Waits for everything queued.
  virtual void synchronize() {}
  // At load, for a matrix this backend reads in host memory
  // (uses_host_memory()): `m` in the file's Rows layout, its n_out rows
  // stacks of `stack_rows` (the experts of a stack; n_out for one matrix)
  // that no unit of a new layout may straddle. When the kernels read it
  // faster in a layout of their own, writes it so into alloc(bytes) (host
  // memory the caller owns) on `pool`'s threads and returns the matrix there;
  // otherwise returns `m` itself, read in place (zero-copy). The CPU backend
  // repacks its packable types into Rows16 (backend/cpu/packed_weights.h).
  virtual MatrixView prepare_weights(const MatrixView& m, int64_t /*stack_rows*/,
                                     const std::function<void*(size_t)>& /*alloc*/,
                                     ThreadPool& /*pool*/) const {
    return m;
  }
  // Read bandwidth of this backend's own memory in bytes/s, measured now, for
  // the decode roofline; 0 when it is host RAM (measure_host_bandwidth).
  virtual double measure_read_bandwidth() { return 0; }
  // Host RAM's bandwidth as this backend's kernels read it, measured now on
  // its thread pool (the CPU backend: a STREAM-like probe, backend/cpu/
  // bandwidth.h): read, and triad unless `read_only`. Zeros from a backend
  // whose kernels do not run on the host.
  virtual MemoryBandwidth measure_host_bandwidth(bool /*read_only*/) { return {}; }

  // Takes the step's batch (copies what the kernels need to the device) and
  // prepares the RoPE tables for its positions (rope() and rope_kv_write()
  // name one by its index in `ropes`).
  virtual void begin_step(const StepInputs& in, std::span<const RopeParams> ropes) = 0;
  void begin_step(const StepInputs& in, const RopeParams& rope) { begin_step(in, {&rope, 1}); }

  // Recorded layer runs (CUDA graphs: one launch for a step's layers instead
  // of hundreds). Before running layers [begin, end) of a step the model asks
  // begin_layers():
  //   kRun       make the calls, then end_layers() (true)
  //   kRecord    make the calls, then end_layers(), which runs the recording;
  //              false: recording failed and nothing ran, make them again
  //   kReplayed  the backend ran its recording of the same calls from an
  //              earlier step of this shape: skip them (no end_layers())
  // A backend may only replay calls that are the same given its step shape
  // (begin_step) and the layer range, with buffers it has not freed since:
  // the caller keeps one KV cache storage per model while it lives (as the
  // engine does); steps over another live storage would replay the first's.
  // cancel_layers() ends a run (and drops a recording) cut short by an
  // exception.
  enum class LayerRun { kRun, kRecord, kReplayed };
  virtual LayerRun begin_layers(int32_t /*begin*/, int32_t /*end*/) { return LayerRun::kRun; }
  virtual bool end_layers() { return true; }
  virtual void cancel_layers() noexcept {}

  // y_i = x W_i^T for each output, then its epilogue; x [rows][n_in] shared
  // by all of them.
  virtual void matmul(const float* x, int64_t rows, const MatmulOutput* outs, size_t n_outs) = 0;
  void matmul(const float* x, int64_t rows, std::initializer_list<MatmulOutput> outs) {
    matmul(x, rows, outs.begin(), outs.size());
  }
  // Per-group products, back to back: y_g = x_g ws[g]^T for g < groups, with
  // x_g = x + g * rows * n_in and y_g = y + g * rows * n_out (every ws[g] of
  // one type and shape): MLA's per-head absorptions. The default runs
  // matmul() per group; the CPU backend runs them in one parallel region (a
  // decode step's 2 x n_head small products, one pool dispatch each before).
  virtual void matmul_groups(const float* x, int64_t rows, const MatrixView* ws, int64_t groups,
                             float* y);
  // y_i = rms_norm(x) W_i^T: RMSNorm (as rms_norm below, weight `norm`) of
  // each row of x ([rows][n_in]), then the products. The normalized rows go to
  // h ([rows][n_in]) unless the backend fuses the norm into its matmul input
  // (then h is untouched). The default runs rms_norm into h, then matmul.
  virtual void norm_matmul(const float* x, const float* norm, float eps, float* h, int64_t rows,
                           const MatmulOutput* outs, size_t n_outs);
  void norm_matmul(const float* x, const float* norm, float eps, float* h, int64_t rows,
                   std::initializer_list<MatmulOutput> outs) {
    norm_matmul(x, norm, eps, h, rows, outs.begin(), outs.size());
  }
  // y_i = (silu(gate) * up) W_i^T, gate and up [rows][n_in] (as silu_mul,
  // then matmul). gate may be overwritten with silu(gate) * up, or left as it
  // is when the backend fuses the product into its matmul input.
  virtual void silu_mul_matmul(float* gate, const float* up, int64_t rows, const MatmulOutput* outs,
                               size_t n_outs);
  void silu_mul_matmul(float* gate, const float* up, int64_t rows,
                       std::initializer_list<MatmulOutput> outs) {
    silu_mul_matmul(gate, up, rows, outs.begin(), outs.size());
  }
  // out = paged_attention(q) (as paged_attention below), then y_i = out W_i^T
  // (as matmul, `rows` the step's tokens): attention and its output
  // projection. The default makes the two calls; a backend may also hand the
  // attention's output to its matmul in its own input form.
  virtual void attention_matmul(const KvLayerView& kv, const float* q, float* out, int32_t n_heads,
                                float scale, int64_t rows, const MatmulOutput* outs, size_t n_outs);
  void attention_matmul(const KvLayerView& kv, const float* q, float* out, int32_t n_heads,
                        float scale, int64_t rows, std::initializer_list<MatmulOutput> outs) {
    attention_matmul(kv, q, out, n_heads, scale, rows, outs.begin(), outs.size());
  }
  // y_i = (act(gate) * up) W_i^T, as silu_mul_matmul for any activation. The
  // default runs glu(), then matmul (SiLU: silu_mul_matmul).
  virtual void glu_matmul(Activation act, float* gate, const float* up, int64_t rows,
                          const MatmulOutput* outs, size_t n_outs);
  void glu_matmul(Activation act, float* gate, const float* up, int64_t rows,
                  std::initializer_list<MatmulOutput> outs) {
    glu_matmul(act, gate, up, rows, outs.begin(), outs.size());
  }
  // Reserves the matmul scratch for `rows` rows against w, so that steps do
  // not allocate.
  virtual void reserve_matmul(const MatrixView& /*w*/, int64_t /*rows*/) {}

  // out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight   (out may alias x;
  // weight null: no weight, where supports(kPerLayerInputs))
  virtual void rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t n,
                        float eps) = 0;
  virtual void add_inplace(float* x, const float* y, int64_t count) = 0;
  // x[r * stride + i] += bias[i]
  virtual void add_bias(float* x, const float* bias, int64_t rows, int64_t n, int64_t stride) = 0;
  // gate[i] = silu(gate[i]) * up[i]
  virtual void silu_mul(float* gate, const float* up, int64_t count) = 0;
  // gate[i] = act(gate[i]) * up[i]; the default takes SiLU only (silu_mul) and
  // refuses the others.
  virtual void glu(Activation act, float* gate, const float* up, int64_t count);
  // Rotates the first n_rot dims of each head of the step's token rows
  // (row t at x + t * stride, position of token t from begin_step()) by RoPE
  // table `table` of the step.
  virtual void rope(float* x, int64_t stride, int32_t n_heads, int32_t head_dim, RopeStyle style,
                    int32_t table) = 0;
  void rope(float* x, int64_t stride, int32_t n_heads, int32_t head_dim, RopeStyle style) {
    rope(x, stride, n_heads, head_dim, style, 0);
  }
  // Stores the step's K and V rows ([n_tokens][n_kv_heads * head_dim]) at the
  // tokens' slots, rounded to the cache type.
  virtual void kv_write(const KvLayerView& kv, const float* k, const float* v) = 0;
  // A layer's RoPE and cache write: rotates q ([n_tokens][n_heads * head_dim])
  // and k ([n_tokens][kv.n_kv_heads * head_dim]) as rope() does, then stores
  // the rotated k and v as kv_write(). q holds its rotated rows afterwards; k
  // is left unspecified (rotated, or as it was when the backend rotates on
  // the way to the cache). The default makes the three calls.
  virtual void rope_kv_write(const KvLayerView& kv, float* q, int32_t n_heads, float* k,
                             const float* v, RopeStyle style, int32_t table);
  void rope_kv_write(const KvLayerView& kv, float* q, int32_t n_heads, float* k, const float* v,
                     RopeStyle style) {
    rope_kv_write(kv, q, n_heads, k, v, style, 0);
  }
  // Causal attention of the step's queries over the paged cache through the
  // block tables (backend/cpu/paged_attention.h contract); q and out
  // [n_tokens][n_heads * head_dim].
  virtual void paged_attention(const KvLayerView& kv, const float* q, float* out, int32_t n_heads,
                               float scale) = 0;
  // MLA's plain prefill form (model/mla_block.h), where mla_plain_form():
  // kv_read: out[i] = columns [col, col + n) of the f32 cache row of position
  // first + i (i < count) of the step's sequence `seq`. attention_rows:
  // causal attention of n_tokens queries ([n_tokens][n_heads][head_dim], at
  // `positions`, host memory) over f32 K and V rows [positions][n_kv_heads]
  // [head_dim] where row p is position p; out as q. Each (token, head) as
  // paged_attention computes it: the same bits in any batch. The defaults of
  // these three throw.
  virtual bool mla_plain_form() const { return false; }
  virtual void kv_read(const KvLayerView& kv, int32_t seq, int32_t first, int32_t count,
                       int32_t col, int32_t n, float* out);
  virtual void attention_rows(const float* q, const float* k, const float* v, float* out,
                              int32_t n_tokens, const int32_t* positions, int32_t n_heads,
                              int32_t n_kv_heads, int32_t head_dim, float scale);
  // paged_attention of the step's tokens `tokens` only ([n] indices, host
  // memory); q and out rows follow that list (a step with prompt tokens in the
  // plain form and decode tokens in the absorbed one).
  virtual void paged_attention_tokens(const KvLayerView& kv, const float* q, float* out,
                                      int32_t n_heads, float scale, int32_t n,
                                      const int32_t* tokens);

  // Mixture of experts (model/moe_routing.h). `rows`, `weights`: host memory.
  // out[i] = x[rows[i]] for i < count (rows of n floats). The default copies
  // row by row.
  virtual void gather_rows(const float* x, int64_t n, const int32_t* rows, int64_t count,
                           float* out);
  // For each token t < n_tokens: s = sum over j < k, in j order, of
  // weights[t * k + j] * y[rows[t * k + j]] (rows of n floats); then
  // out[t] += s (add) or out[t] = s. A token's result depends on its own rows
  // only. The default computes on the host (download, upload).
  virtual void combine_rows(const float* y, int64_t n, const int32_t* rows, const float* weights,
                            int64_t n_tokens, int32_t k, float* out, bool add);

  // Gated delta-net layers (backend/recurrent_args.h: layouts, math, what is
  // updated in place, and the bits guaranteed across batches and splits).
  // `batch`: host memory. The defaults throw (supports(kRecurrentState) is
  // false on such a backend).
  // y = causal depthwise conv of x with each sequence's carried inputs
  // (optionally SiLU); the states then hold each sequence's last kernel - 1
  // inputs.
  virtual void ssm_conv(const SsmConvArgs& args, const RecurrentBatch& batch);
  // out = the gated delta rule's outputs for the rows; the states advance
  // past them.
  virtual void gated_delta_rule(const GatedDeltaArgs& args, const RecurrentBatch& batch);

 protected:
  // Runs the outputs' epilogues with add_bias() and add_inplace(), for a
  // matmul() that does not fuse them.
  void finish_outputs(int64_t rows, const MatmulOutput* outs, size_t n_outs);
};

// Backend::combine_rows on host memory (every pointer host memory): the
// reference the backends' kernels follow.
void combine_rows_host(const float* y, int64_t n, const int32_t* rows, const float* weights,
                       int64_t n_tokens, int32_t k, float* out, bool add);

// Paged-attention arguments for one layer's cache, contiguous q/out rows of
// n_heads heads and the step's tokens; the caller adds the block tables in
// its kernel's form.
PagedAttentionArgs paged_attention_args(const KvLayerView& kv, const float* q, float* out,
                                        int32_t n_heads, float scale, int32_t n_tokens,
                                        const int32_t* token_seq, const int32_t* token_pos);

// An allocation of a backend's memory (or of the host memory it downloads
// into fastest: kHost), released on destruction. Move-only.
class BackendBuffer {
 public:
  enum class Memory { kBackend, kHost };
  BackendBuffer() = default;
  BackendBuffer(Backend& backend, size_t bytes, Memory memory = Memory::kBackend);
  ~BackendBuffer() { reset(); }
  BackendBuffer(BackendBuffer&& o) noexcept { *this = std::move(o); }
  BackendBuffer& operator=(BackendBuffer&& o) noexcept;
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  size_t bytes() const { return bytes_; }
  // At least `bytes` (contents dropped when it grows).
  void ensure(Backend& backend, size_t bytes, Memory memory = Memory::kBackend);
  void reset();

 private:
  Backend* backend_ = nullptr;
  Memory memory_ = Memory::kBackend;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace pagellm
