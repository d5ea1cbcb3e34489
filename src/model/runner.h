// The model runner: any registered decoder family (model/registry.h):
// the token embedding, n_layer layers as the family runs them (its
// run_layer, from the shared blocks of model/blocks.h, each layer writing
// its K/V into the paged cache), then the output norm, the vocabulary
// projection and the family's final soft cap.
//
// Layers run in contiguous ranges, each on the backend of the device that
// holds it (backend/backend.h): the CPU for the host and virtual CPU devices,
// CUDA for GPUs. The token embedding is gathered on the host; the device of
// the last layer also runs the output head. Layers on a device whose memory
// is not host RAM have their weights copied there at load.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "backend/recurrent_args.h"
#include "gguf/gguf_reader.h"
#include "kvcache/kv_cache_storage.h"
#include "kvcache/kv_group.h"
#include "kvcache/kv_pool.h"
#include "model/batch.h"
#include "model/device_weights.h"
#include "model/architecture.h"
#include "model/hparams.h"
#include "model/per_layer_inputs.h"
#include "model/pipeline_link.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace pagellm {

struct ModelLoadOptions {
  bool use_mmap = true;
  bool mlock = false;
  // Copy the matrices of layers that run from host memory into their
  // backend's layout at load where it has a faster one (ModelWeights::repack,
  // Backend::prepare_weights: the CPU's Rows16); off keeps every matrix in
  // the file (zero-copy).
  bool repack = true;
  // Dequantize every matrix to F32 at load (replaces repack): the forward
  // pass then keeps activations in float throughout, an accuracy reference
  // for quantized files (about 1e-3 relative of a float64 pass) at 4-8x the
  // weight memory.
  bool f32_weights = false;
  // Which device runs which layers (device names as plans write them:
  // "host", "cpu:0", "cuda:1"), tiling [0, n_layer) in order; empty: all on
  // the host.
  std::vector<KvPoolPlacement> placements;
  // Mixture-of-experts layers whose experts run on the host while the rest of
  // the layer runs on its device (per layer; empty: every layer's experts
  // with the layer). The plan's Plan::experts_on_host().
  std::vector<bool> experts_on_host;
  // Makes each device's backend; empty: make_backend().
  BackendFactory backend_factory;
  // A pipeline stage (multi-node): this process holds layers [stage_begin,
  // stage_end) only (stage_end 0: to the last); `placements` tile that range,
  // and the layers outside it are neither repacked nor copied anywhere.
  int32_t stage_begin = 0;
  int32_t stage_end = 0;
};

// The weights one decode step streams on one device: every matrix of its
// layers once, and the output projection on the device of the last layer.
struct DeviceWeightShare {
  std::string device;
  Backend* backend = nullptr;
  uint64_t bytes = 0;
};

class ModelRunner {
 public:
  // Opens, validates and maps the model, and copies the layers placed on
  // devices there. Throws SystemError / FormatError / ConfigError (a bad
  // placement or device) / the backend's error.
  static std::unique_ptr<ModelRunner> load(const std::string& path, ModelLoadOptions opts = {});
  ~ModelRunner();

  const ModelHParams& hparams() const { return hp_; }
  const Architecture& architecture() const { return *arch_; }
  const ModelWeights& weights() const { return w_; }
  const GgufFile& file() const { return *file_; }

  // The model's KV groups: its full-attention layers, and one group per
  // sliding window (kvcache/kv_group.h).
  KvGroups kv_groups() const;
  // Shape of a KV pool holding every layer of this model.
  KvPoolShape kv_shape(int32_t num_blocks, int32_t block_size, DType kv_type) const;
  // The recurrent layers' state for n_slots sequences (none when the model
  // has no recurrent layer: RecurrentStateSpec::any() false).
  RecurrentStateSpec recurrent_state(int32_t n_slots) const;

  // The devices' layer ranges, in layer order.
  const std::vector<KvPoolPlacement>& placements() const { return placements_; }
  // Runs the layers on these devices from now on. Layers whose weights are in
  // host memory may move freely between CPU devices; weights copied to a
  // device at load stay there (ConfigError when `placements` differ).
  void place(const std::vector<KvPoolPlacement>& placements);
  // The backend of a device in the placement; null when none runs there.
  Backend* backend_for_device(const std::string& device) const;
  // Per device in the placement, in layer order; the bytes add up to
  // weights().streamed_bytes_per_token().
  std::vector<DeviceWeightShare> weight_shares() const;

  // Runs one step: writes every token's K/V at its slot, then returns the
  // logits of batch.logit_tokens, row after row ([logit_tokens.size()]
  // [n_vocab]), in host memory of the model's that stays valid until the next
  // forward() (pinned memory when the output head runs on a GPU). Throws
  // ConfigError on a bad token id. Each layer uses the pool that holds it (in
  // its device's memory); where consecutive layers sit on different devices
  // the hidden state is copied.
  std::span<const float> forward(const Batch& batch, KvCacheStorage& kv, ThreadPool& pool);
  // After forward(): the final-normed hidden states of batch.hidden_tokens,
  // row after row ([hidden_tokens.size()][n_embd]), in host memory; valid
  // until the next forward(). Needs the last layer here (not a pipeline).
  std::span<const float> hidden_rows() const { return hidden_out_; }
  // The same, with the logits copied into `logits`.
  void forward(const Batch& batch, KvCacheStorage& kv, ThreadPool& pool,
               std::vector<float>& logits);
  // Allocates and touches the activation workspace for batches of up to
  // `max_tokens` tokens and `max_logit_rows` rows of logits on every device,
  // so that the memory the plan counted is resident from the start and steps
  // never grow it.
  void reserve_workspace(int64_t max_tokens, int64_t max_logit_rows);

  // Pipeline stages: the layers this runner holds.
  int32_t stage_begin() const { return stage_begin_; }
  int32_t stage_end() const { return stage_end_; }
  bool last_stage() const { return stage_end_ == hp_.n_layer; }
  // A first stage that is not the last hands its hidden state to `link`
  // (which must outlive its use) in forward(), and returns what it brings back.
  void set_pipeline_link(PipelineLink* link) { link_ = link; }
  // A later stage's step: starts from `hidden` ([n_tokens][n_embd], the
  // previous stage's output) and returns its own output: the logits of
  // batch.logit_tokens on the last stage, else its hidden state
  // ([n_tokens][n_embd]); valid until the next call.
  std::span<const float> forward_stage(const Batch& batch, KvCacheStorage& kv, ThreadPool& pool,
                                       std::span<const float> hidden);
  // Bytes of hidden state moved between devices so far.
  uint64_t transfer_bytes() const { return transfer_bytes_; }
  // Bytes of weights copied to devices at load.
  uint64_t device_weight_bytes() const { return device_weights_.bytes(); }
  // Whether layer l's experts run on the host, away from the layer's device.
  bool experts_on_host(int32_t l) const {
    return !experts_on_host_.empty() && experts_on_host_[static_cast<size_t>(l)];
  }

 private:
  // Recurrent layers: the step's RecurrentBatch from the batch (and its
  // state resets and copies applied).
  void prepare_recurrent(const Batch& batch, KvCacheStorage& kv);
  RecurrentBatch recurrent_;
  const Batch* step_batch_ = nullptr;  // the step's, for LayerContext::batch
  std::vector<int32_t> rb_begin_, rb_first_;
  ModelRunner();
  // `requested` without empty ranges (none: every layer of the stage on the
  // host), checked to cover the stage's layers in order.
  std::vector<KvPoolPlacement> checked_placements(
      const std::vector<KvPoolPlacement>& requested) const;
  struct Segment;
  Backend& backend_of(const std::string& device);
  void ensure_workspace(Segment& s, int64_t tokens, int64_t logit_rows);
  // MLA's plain form: each segment that runs it gets scratch for the step's
  // longest prompt context (model/mla_block.h).
  void ensure_mla_plain(const Batch& batch);
  void run_layer(Segment& s, int32_t l, KvCacheStorage& kv, int64_t T);
  // The segment's layers, through the backend's recording when it has one
  // (Backend::begin_layers).
  void run_layers(Segment& s, KvCacheStorage& kv, int64_t T);
  // forward() and forward_stage(): from the embedding (hidden_in null) or
  // from a previous stage's hidden state.
  std::span<const float> run_stage(const Batch& batch, KvCacheStorage& kv, ThreadPool& pool,
                                   const float* hidden_in, bool hand_over = true);
  // The first stage's step in micro-batches through link_ (PipelineLink::send).
  std::span<const float> forward_pipelined(const Batch& batch, KvCacheStorage& kv, ThreadPool& pool,
                                           int32_t parts);

  std::unique_ptr<GgufFile> file_;
  ModelHParams hp_;
  const Architecture* arch_ = nullptr;
  std::vector<RopeParams> ropes_;  // the step's RoPE tables (hp_.rope_tables with factors)
  ModelWeights w_;
  BackendFactory factory_;
  std::map<std::string, std::unique_ptr<Backend>> backends_;  // by device name
  std::vector<KvPoolPlacement> placements_;
  std::vector<bool> experts_on_host_;  // per layer, or empty
  std::vector<Segment> segments_;
  bool weights_on_devices_ = false;
  DeviceWeights device_weights_;
  // Per step, host memory.
  std::vector<float> host_x_;
  std::vector<const int32_t*> tables_;  // [group][n_seqs], flattened
  std::vector<int32_t> block_counts_;
  std::vector<StepInputs::Group> step_groups_;  // groups 1..
  uint64_t transfer_bytes_ = 0;
  int32_t stage_begin_ = 0, stage_end_ = 0;
  PipelineLink* link_ = nullptr;
  std::vector<float> stage_out_;  // a non-final stage's hidden state, in host memory
  std::vector<float> hidden_out_;  // the last step's normed rows of batch.hidden_tokens
  std::vector<Batch> micro_;      // a pipelined step's parts
  std::vector<float> pipelined_logits_;
  // Per-layer inputs (Gemma 4): the tables, and the step's [layer][T][P] rows
  // of this stage's layers.
  PerLayerInputs per_layer_inputs_;
  std::vector<float> layer_inputs_;
};

}  // namespace pagellm
