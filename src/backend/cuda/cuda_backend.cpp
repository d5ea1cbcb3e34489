#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "backend/cuda/bandwidth.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/delta_net.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_q8.h"
#include "backend/cuda/kv_write.h"
#include "backend/cuda/mmq.h"
#include "backend/cuda/moe_ops.h"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/paged_attention.h"
#include "backend/cuda/pdl.h"
#include "backend/cuda/q8_activations.h"
#include "backend/cuda/step_upload.h"

namespace pagellm::cuda {

namespace {

// True when environment variable `name` is set to `value`.
bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e && std::string(e) == value;
}

// PAGELLM_CUDA_GEMV=f32 keeps decode on the f32 GEMV for every weight type
// (comparisons, and a way around the int8 kernels should one misbehave).
bool int8_gemv_enabled() {
  return !env_is("PAGELLM_CUDA_GEMV", "f32");
}

// PAGELLM_CUDA_MMQ=0 sends the products of 33 to 128 rows to cuBLAS.
bool mmq_enabled() {
  return !env_is("PAGELLM_CUDA_MMQ", "0");
}

// PAGELLM_CUDA_PROFILE=1: time per operation (op_profile.h), reported on
// stderr when the backend goes; recorded steps are off meanwhile.
bool profile_enabled() {
  return env_is("PAGELLM_CUDA_PROFILE", "1");
}

bool graphs_enabled() {
  return !env_is("PAGELLM_CUDA_GRAPHS", "0");
}

// Block tables are uploaded this many entries wide at least (a multiple of
// it): a growing sequence then changes the step's shape, and so its recorded
// graph, once per 512 tokens (blocks of 16) instead of once per block.
constexpr int32_t kTableStrideStep = 32;

// "[1]", "[2-8]", "[9-32]", "[33-128]", "[129+]": the kernel families' row ranges.
static_assert(CudaBackend::kGemvMaxRows == 32 && CudaBackend::kMmqMaxRows == 128,
              "rows_bucket's labels name the GEMV's and mmq's row limits");
const char* rows_bucket(int64_t rows) {
  return rows <= 1     ? "[1]"
         : rows <= 8   ? "[2-8]"
         : rows <= 32  ? "[9-32]"
         : rows <= 128 ? "[33-128]"
                       : "[129+]";
}

// Brackets a public operation when profiling: "op TYPE xN [rows]".
class ProfileScope {
 public:
  ProfileScope(OpProfile* p, const char* op, int64_t rows = -1, const MatmulOutput* outs = nullptr,
               size_t n_outs = 0)
      : p_(p) {
    if (!p_) return;
    std::string name = op;
    if (outs && n_outs > 0) name += fmt::format(" {} x{}", dtype_name(outs[0].w->type), n_outs);
    if (rows >= 0) name += fmt::format(" {}", rows_bucket(rows));
    p_->begin(name);
  }
  ~ProfileScope() {
    if (!p_) return;
    try {
      p_->end();
    } catch (...) {  // a failed event record loses one sample, not the step
    }
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  OpProfile* p_;
};

}  // namespace

CudaBackend::CudaBackend(int index, const std::string& label)
    : dev_(index),
      vmm_(std::make_unique<VmmRanges>(index)),
      graphs_(dev_, graphs_enabled() && !profile_enabled()),
      int8_gemv_(int8_gemv_enabled()),
      mmq_(mmq_enabled()) {
  name_ =
      fmt::format("{} ({})", label.empty() ? fmt::format("cuda:{}", index) : label, dev_.name());
  if (profile_enabled()) profile_ = std::make_unique<OpProfile>(dev_);
  pdl_enabled(dev_);  // its probe allocates: never first met inside a capture
}

CudaBackend::~CudaBackend() {
  if (!profile_) return;
  try {
    profile_->collect();
    if (!profile_->stats().empty())
      fmt::print(stderr, "pagellm: CUDA time per operation on {} (PAGELLM_CUDA_PROFILE)\n{}", name_,
                 profile_->stats().table());
  } catch (const std::exception& e) {
    fmt::print(stderr, "pagellm: CUDA profile of {} lost: {}\n", name_, e.what());
  }
}

void* CudaBackend::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  dev_.make_current();
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), fmt::format("cudaMalloc({} bytes)", bytes), dev_.index());
  try {
    dev_.fill_zero(p, bytes);
    dev_.synchronize();
  } catch (...) {
    cudaFree(p);
    throw;
  }
  return p;
}

namespace {

// Frees p (device memory, or pinned host memory with cudaFreeHost) once the
// work queued on `stream` of `device`, which may still use it, is done;
// errors here cannot be reported.
void free_after_stream(int device, void* stream, void* p, bool host) noexcept {
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(device);
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (host)
    cudaFreeHost(p);
  else
    cudaFree(p);
  cudaSetDevice(prev);
}

}  // namespace

void CudaBackend::deallocate(void* p, size_t /*bytes*/) noexcept {
  if (!p) return;
  graphs_.invalidate();  // a recording may point into p
  free_after_stream(dev_.index(), dev_.stream(), p, false);
}

void* CudaBackend::reserve_range(size_t bytes) {
  static const bool enabled = [] {
    const char* v = std::getenv("PAGELLM_CUDA_VMM");
    return !(v && std::string_view(v) == "0");
  }();
  if (!enabled) return nullptr;
  dev_.make_current();
  return vmm_->reserve(bytes);
}

bool CudaBackend::commit_range(void* p, size_t bytes) {
  dev_.make_current();
  return vmm_->commit(p, bytes);
}

void CudaBackend::decommit_range(void* p, size_t bytes) noexcept {
  try {
    dev_.make_current();
  } catch (...) {
    return;  // the device is gone: nothing to give back
  }
  vmm_->decommit(p, bytes);
}

void CudaBackend::release_range(void* p, size_t bytes) noexcept {
  try {
    dev_.make_current();
  } catch (...) {
  }
  vmm_->release(p, bytes);
}

size_t CudaBackend::elastic_granularity() const {
  return vmm_->granularity();
}

void* CudaBackend::allocate_host(size_t bytes) {
  if (bytes == 0) return nullptr;
  dev_.make_current();
  void* p = nullptr;
  check_cuda(cudaHostAlloc(&p, bytes, cudaHostAllocPortable),
             fmt::format("cudaHostAlloc({} bytes)", bytes), dev_.index());
  std::memset(p, 0, bytes);  // touched now: resident, as the plan counted it
  return p;
}

void CudaBackend::free_host(void* p, size_t /*bytes*/) noexcept {
  if (p) free_after_stream(dev_.index(), dev_.stream(), p, true);  // a copy may still write p
}

void CudaBackend::upload(void* dst, const void* host_src, size_t bytes) {
  dev_.to_device(dst, host_src, bytes);
}

void CudaBackend::download(void* host_dst, const void* src, size_t bytes) {
  ProfileScope scope(profile_.get(), "download");
  dev_.to_host(host_dst, src, bytes);
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  dev_.make_current();
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                             static_cast<cudaStream_t>(dev_.stream())),
             fmt::format("cudaMemcpyAsync(device to device, {} bytes)", bytes), dev_.index());
}

void CudaBackend::enable_peer_access(int peer) {
  if (peer == dev_.index() || peers_checked_.count(peer)) return;
  peers_checked_.insert(peer);
  // Direct copies between the two GPUs where the hardware allows (NVLink,
  // PCIe P2P); otherwise cudaMemcpyPeerAsync goes through the host.
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, peer, dev_.index()) != cudaSuccess || !can) {
    cudaGetLastError();
    return;
  }
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(peer);
  const cudaError_t e = cudaDeviceEnablePeerAccess(dev_.index(), 0);
  cudaSetDevice(prev);
  if (e != cudaSuccess) cudaGetLastError();  // e.g. already enabled: not an error
}

void CudaBackend::copy_to(Backend& to, void* dst, const void* src, size_t bytes) {
  ProfileScope scope(profile_.get(), "copy_to");
  auto* other = dynamic_cast<CudaBackend*>(&to);
  if (!other) return Backend::copy_to(to, dst, src, bytes);
  if (bytes == 0) return;
  // The source's kernels first; the copy runs on the receiver's stream
  // (directly between the GPUs where peer access allows, else through the
  // host, as cudaMemcpyPeerAsync does), and is complete on return.
  dev_.synchronize();
  enable_peer_access(other->dev_.index());
  other->dev_.make_current();
  check_cuda(cudaMemcpyPeerAsync(dst, other->dev_.index(), src, dev_.index(), bytes,
                                 static_cast<cudaStream_t>(other->dev_.stream())),
             fmt::format("cudaMemcpyPeerAsync(cuda:{} to cuda:{}, {} bytes)", dev_.index(),
                         other->dev_.index(), bytes),
             dev_.index());
  other->dev_.synchronize();
}

double CudaBackend::measure_read_bandwidth() {
  // 1 GiB, or a quarter of what is free on a smaller or fuller GPU.
  size_t free_b = 0, total_b = 0;
  dev_.make_current();
  check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo", dev_.index());
  return cuda::measure_read_bandwidth(dev_, std::min<size_t>(size_t{1} << 30, free_b / 4));
}

void CudaBackend::grow(DeviceBuffer& b, size_t bytes) {
  if (b.data() && bytes <= b.bytes()) return;
  // Growing frees and allocates, which a stream capture cannot hold. Shapes
  // are recorded the second time they are met, after a run that grew what
  // they need, so this is a broken invariant, not an input: fail the step.
  if (graphs_.recording())
    throw Error(
        fmt::format("{}: a buffer would grow to {} bytes during a recorded step", name_, bytes));
  graphs_.invalidate();
  b.reserve(dev_, bytes);
}

void CudaBackend::grow_pow2(DeviceBuffer& b, size_t need, size_t min_bytes) {
  if (b.data() && b.bytes() >= need) return;
  size_t want = min_bytes;
  while (want < need) want *= 2;
  grow(b, want);
}

void CudaBackend::begin_step(const StepInputs& in, std::span<const RopeParams> ropes) {
  if (profile_) profile_->collect();  // the last step's events, passed by now
  ProfileScope scope(profile_.get(), "begin_step", in.n_tokens);
  n_tokens_ = in.n_tokens;
  n_seqs_ = in.n_seqs;
  const StepUploadLayout l = pack_step_inputs(in, staging_, kTableStrideStep);
  table_stride_ = l.table_stride;
  grow_pow2(step_buf_, l.total, 4096);
  dev_.to_device(step_buf_.data(), staging_.data(), l.total);
  auto* base = static_cast<uint8_t*>(step_buf_.data());
  d_positions_ = reinterpret_cast<const int32_t*>(base);
  d_token_seq_ = reinterpret_cast<const int32_t*>(base + l.off_seq);
  d_slots_.assign(1, reinterpret_cast<const int64_t*>(base + l.off_slots));
  d_tables_.assign(1, reinterpret_cast<const int32_t*>(base + l.off_tables));
  for (size_t g = 0; g < l.group_slots.size(); ++g) {
    d_slots_.push_back(reinterpret_cast<const int64_t*>(base + l.group_slots[g]));
    d_tables_.push_back(reinterpret_cast<const int32_t*>(base + l.group_tables[g]));
  }
  step_recurrent_ = in.recurrent ? *in.recurrent : RecurrentBatch{};
  d_token_begin_ = d_state_slot_ = nullptr;
  if (in.recurrent) {
    d_token_begin_ = reinterpret_cast<const int32_t*>(base + l.off_token_begin);
    d_state_slot_ = reinterpret_cast<const int32_t*>(base + l.off_state_slot);
  }

  if (ropes.size() != ropes_.size()) {
    graphs_.invalidate();
    if (!ropes_.empty()) dev_.synchronize();  // queued kernels may still read the old tables
    ropes_.resize(ropes.size());
    rope_params_.resize(ropes.size());
  }
  for (size_t i = 0; i < ropes.size(); ++i) {
    const RopeParams& rope = ropes[i];
    auto& cache = ropes_[i];
    if (!cache || !(rope == rope_params_[i])) {
      graphs_.invalidate();
      if (cache) dev_.synchronize();  // queued kernels may still read the old tables
      cache = std::make_unique<CudaRopeCache>(rope.n_rot, rope.freq_base, rope.freq_scale,
                                              rope.freq_factors, rope.attn_factor);
      rope_params_[i] = rope;
    }
    const void* table = cache->table();
    cache->prepare(dev_, d_positions_, in.n_tokens);
    if (cache->table() != table) graphs_.invalidate();
  }
}

const CudaRopeCache& CudaBackend::rope_table(int32_t table) const {
  if (table < 0 || static_cast<size_t>(table) >= ropes_.size())
    throw Error(fmt::format("{}: RoPE table {} before the step's begin_step() prepared it", name_,
                            table));
  return *ropes_[static_cast<size_t>(table)];
}

void CudaBackend::check_attention(const KvLayerView& kv) const {
  if (kv.group < 0 || static_cast<size_t>(kv.group) >= d_tables_.size())
    throw Error(fmt::format("{}: KV group {} has no block tables this step", name_, kv.group));
}

Backend::LayerRun CudaBackend::begin_layers(int32_t begin, int32_t end) {
  LayerRun r = LayerRun::kRun;
  if (n_tokens_ > 0 &&
      (n_tokens_ <= kGemvMaxRows || (n_tokens_ <= int8_max_rows() && !cublas_in_int8_range_)))
    r = graphs_.begin(LayerGraphs::Key{begin, end, n_tokens_, n_seqs_, table_stride_});
  // Until end_layers / cancel_layers (a replayed run has neither).
  in_layers_ = r != LayerRun::kReplayed;
  return r;
}

bool CudaBackend::end_layers() {
  in_layers_ = false;
  return !graphs_.recording() || graphs_.end();
}

void CudaBackend::cancel_layers() noexcept {
  in_layers_ = false;
  graphs_.cancel();
}

void CudaBackend::check_outputs(int64_t rows, const MatmulOutput* outs, size_t n_outs) const {
  for (size_t i = 0; i < n_outs; ++i) {
    const MatrixView& w = *outs[i].w;
    if (w.layout != WeightLayout::Rows)
      throw Error(fmt::format("{}: a matrix in the CPU's repacked layout cannot run here", name_));
    if (w.row_stride != dtype_row_bytes(w.type, w.n_in))  // the kernels assume packed rows
      throw Error(fmt::format("{}: a {} matrix with {}-byte rows padded to {} bytes", name_,
                              dtype_name(w.type), dtype_row_bytes(w.type, w.n_in), w.row_stride));
    if (w.n_in != outs[0].w->n_in)
      throw Error(fmt::format("{}: matrices of {} and {} columns share one input", name_,
                              outs[0].w->n_in, w.n_in));
  }
}

int64_t CudaBackend::int8_max_rows() const {
  return !int8_gemv_ ? 0 : mmq_ ? kMmqMaxRows : kGemvMaxRows;
}

bool CudaBackend::uses_int8(DType type, int64_t rows) const {
  return rows <= int8_max_rows() && gemv_q8_supports(type);
}

bool CudaBackend::int8_inputs(int64_t rows, const MatmulOutput* outs, size_t n_outs) const {
  if (n_outs == 0) return false;
  for (size_t i = 0; i < n_outs; ++i)
    if (!uses_int8(outs[i].w->type, rows)) return false;
  return true;
}

void* CudaBackend::int8_buffer(int64_t rows, int64_t n_in) {
  grow(q8_act_, q8_act_bytes(rows, n_in));
  return q8_act_.data();
}

void CudaBackend::products(const float* x, int64_t rows, const MatmulOutput* outs, size_t n_outs) {
  if (rows == 0) return;
  // Outputs whose residual add the int8 GEMV does in its epilogue (those
  // without a bias, which comes before the add).
  std::vector<char>& fused = fused_add_;
  fused.assign(n_outs, 0);
  for (size_t i = 0; i < n_outs;) {
    const MatrixView& w = *outs[i].w;
    if (uses_int8(w.type, rows)) {
      // Consecutive outputs of one type (q, k, v; gate, up): one launch.
      GemvQ8Target t[kGemvQ8MaxTargets];
      int k = 0;
      for (; i < n_outs && k < kGemvQ8MaxTargets && outs[i].w->type == w.type; ++i, ++k) {
        const MatmulOutput& o = outs[i];
        fused[i] = o.add_to && !o.bias;
        t[k] = GemvQ8Target{o.w->data, o.w->n_out, o.y, o.w->n_out, fused[i] ? o.add_to : nullptr};
      }
      const Q8ActView a = q8_act_view(q8_act_.data(), rows, w.n_in);
      if (rows <= kGemvMaxRows)
        gemv_q8_multi(dev_, w.type, w.n_in, t, k, a, static_cast<int32_t>(rows));
      else
        mmq_multi(dev_, w.type, w.n_in, t, k, a, static_cast<int32_t>(rows));
      continue;
    }
    if (rows <= kGemvMaxRows) {
      gemv(dev_, w.type, w.data, w.n_out, w.n_in, x, w.n_in, outs[i].y, w.n_out,
           static_cast<int32_t>(rows));
    } else {
      if (in_layers_ && rows <= kMmqMaxRows) cublas_in_int8_range_ = true;
      gemm(dev_, gemm_ws_, w.type, w.data, w.n_out, w.n_in, x, w.n_in, rows, outs[i].y, w.n_out);
    }
    ++i;
  }
  // Epilogues: biases, then the adds not made yet (per output the contract's order).
  for (size_t i = 0; i < n_outs; ++i)
    if (outs[i].bias) add_bias(outs[i].y, outs[i].bias, rows, outs[i].w->n_out, outs[i].w->n_out);
  for (size_t i = 0; i < n_outs; ++i)
    if (outs[i].add_to && !fused[i])
      add_inplace(outs[i].add_to, outs[i].y, rows * outs[i].w->n_out);
}

void CudaBackend::matmul(const float* x, int64_t rows, const MatmulOutput* outs, size_t n_outs) {
  ProfileScope scope(profile_.get(), "matmul", rows, outs, n_outs);
  check_outputs(rows, outs, n_outs);
  if (n_outs == 0) return;
  const int64_t n_in = outs[0].w->n_in;
  bool any_int8 = false;
  for (size_t i = 0; i < n_outs; ++i) any_int8 |= uses_int8(outs[i].w->type, rows);
  // x quantized once for the outputs that share it.
  if (any_int8) quantize_q8_activations(dev_, x, n_in, rows, n_in, int8_buffer(rows, n_in));
  products(x, rows, outs, n_outs);
}

void CudaBackend::norm_matmul(const float* x, const float* norm, float eps, float* h, int64_t rows,
                              const MatmulOutput* outs, size_t n_outs) {
  ProfileScope scope(profile_.get(), "norm_matmul", rows, outs, n_outs);
  if (!int8_inputs(rows, outs, n_outs))
    return Backend::norm_matmul(x, norm, eps, h, rows, outs, n_outs);
  check_outputs(rows, outs, n_outs);
  // The normalized rows go straight to int8 (h untouched): one launch, not two.
  const int64_t n_in = outs[0].w->n_in;
  rms_norm_q8_activations(dev_, x, norm, rows, n_in, eps, int8_buffer(rows, n_in));
  products(nullptr, rows, outs, n_outs);
}

void CudaBackend::silu_mul_matmul(float* gate, const float* up, int64_t rows,
                                  const MatmulOutput* outs, size_t n_outs) {
  ProfileScope scope(profile_.get(), "silu_mul_matmul", rows, outs, n_outs);
  if (!int8_inputs(rows, outs, n_outs))
    return Backend::silu_mul_matmul(gate, up, rows, outs, n_outs);
  check_outputs(rows, outs, n_outs);
  const int64_t n_in = outs[0].w->n_in;
  silu_mul_q8_activations(dev_, gate, up, rows, n_in, int8_buffer(rows, n_in));
  products(nullptr, rows, outs, n_outs);
}

void CudaBackend::reserve_matmul(const MatrixView& w, int64_t rows) {
  if (uses_int8(w.type, 1)) grow(q8_act_, q8_act_bytes(std::min(rows, int8_max_rows()), w.n_in));
  if (rows <= kGemvMaxRows) return;
  gemm_ws_.w_f16.reserve(dev_, gemm_weight_scratch_bytes(w.type, w.n_out, w.n_in));
  gemm_ws_.x_f16.reserve(dev_, gemm_activation_scratch_bytes(rows, w.n_in));
  gemm_ws_.x_exp.reserve(dev_, checked_bytes(rows, sizeof(int32_t)));
}

void CudaBackend::rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t n,
                           float eps) {
  ProfileScope scope(profile_.get(), "rms_norm", rows);
  cuda::rms_norm(dev_, x, weight, out, rows, n, eps);
}

void CudaBackend::gather_rows(const float* x, int64_t n, const int32_t* rows, int64_t count,
                              float* out) {
  ProfileScope scope(profile_.get(), "gather_rows", count);
  const size_t bytes = static_cast<size_t>(count) * sizeof(int32_t);
  grow_pow2(moe_rows_, bytes, 4096);
  dev_.to_device(moe_rows_.data(), rows, bytes);
  cuda::gather_rows(dev_, x, n, static_cast<const int32_t*>(moe_rows_.data()), count, out);
}

void CudaBackend::combine_rows(const float* y, int64_t n, const int32_t* rows,
                               const float* weights, int64_t n_tokens, int32_t k, float* out,
                               bool add) {
  ProfileScope scope(profile_.get(), "combine_rows", n_tokens);
  const size_t slots = static_cast<size_t>(n_tokens) * static_cast<size_t>(k);
  grow_pow2(moe_rows_, slots * sizeof(int32_t), 4096);
  grow_pow2(moe_weights_, slots * sizeof(float), 4096);
  dev_.to_device(moe_rows_.data(), rows, slots * sizeof(int32_t));
  dev_.to_device(moe_weights_.data(), weights, slots * sizeof(float));
  cuda::combine_rows(dev_, y, n, static_cast<const int32_t*>(moe_rows_.data()),
                     static_cast<const float*>(moe_weights_.data()), n_tokens, k, out, add);
}

void CudaBackend::add_inplace(float* x, const float* y, int64_t count) {
  ProfileScope scope(profile_.get(), "add_inplace");
  cuda::add_inplace(dev_, x, y, count);
}

void CudaBackend::add_bias(float* x, const float* bias, int64_t rows, int64_t n, int64_t stride) {
  ProfileScope scope(profile_.get(), "add_bias", rows);
  cuda::add_bias(dev_, x, bias, rows, n, stride);
}

void CudaBackend::glu(Activation act, float* gate, const float* up, int64_t count) {
  if (act == Activation::kSilu) return silu_mul(gate, up, count);
  if (act == Activation::kSigmoid) {
    ProfileScope scope(profile_.get(), "sigmoid_mul");
    return cuda::sigmoid_mul(dev_, gate, up, count);
  }
  if (act == Activation::kSwigluClamped) {
    ProfileScope scope(profile_.get(), "swiglu_clamped_mul");
    return cuda::swiglu_clamped_mul(dev_, gate, up, count);
  }
  ProfileScope scope(profile_.get(), "gelu_tanh_mul");
  cuda::gelu_tanh_mul(dev_, gate, up, count);
}

void CudaBackend::silu_mul(float* gate, const float* up, int64_t count) {
  ProfileScope scope(profile_.get(), "silu_mul");
  cuda::silu_mul(dev_, gate, up, count);
}

void CudaBackend::rope(float* x, int64_t stride, int32_t n_heads, int32_t head_dim,
                       RopeStyle style, int32_t table) {
  ProfileScope scope(profile_.get(), "rope", n_tokens_);
  rope_table(table).apply(dev_, x, n_tokens_, stride, n_heads, head_dim, style);
}

KvWriteArgs CudaBackend::kv_write_args(const KvLayerView& kv, const float* k,
                                       const float* v) const {
  KvWriteArgs a;
  a.k = k;
  a.k_stride = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim;
  a.v = v;
  a.v_stride = a.k_stride;
  a.slots = d_slots_.at(static_cast<size_t>(kv.group));
  a.n_tokens = n_tokens_;
  a.n_kv_heads = kv.n_kv_heads;
  a.head_dim = kv.head_dim;
  a.k_cache = kv.k;
  a.v_cache = kv.v;
  a.cache_type = kv.type;
  return a;
}

void CudaBackend::kv_write(const KvLayerView& kv, const float* k, const float* v) {
  ProfileScope scope(profile_.get(), "kv_write", n_tokens_);
  cuda::kv_write(dev_, kv_write_args(kv, k, v));
}

void CudaBackend::rope_kv_write(const KvLayerView& kv, float* q, int32_t n_heads, float* k,
                                const float* v, RopeStyle style, int32_t table) {
  ProfileScope scope(profile_.get(), "rope_kv_write", n_tokens_);
  const CudaRopeCache& rope = rope_table(table);
  KvRopeArgs r;
  r.q = q;
  r.q_stride = static_cast<int64_t>(n_heads) * kv.head_dim;
  r.n_heads = n_heads;
  r.n_rot = rope.n_rot();
  r.neox = style == RopeStyle::kNeox;
  r.cos_sin = rope.cos_sin(n_tokens_);
  cuda::rope_kv_write(dev_, kv_write_args(kv, k, v), r);
}

PagedAttentionArgs CudaBackend::attention_args(const KvLayerView& kv, const float* q, float* out,
                                               int32_t n_heads, float scale) const {
  PagedAttentionArgs a =
      paged_attention_args(kv, q, out, n_heads, scale, n_tokens_, d_token_seq_, d_positions_);
  a.block_table_flat = d_tables_.at(static_cast<size_t>(kv.group));
  a.block_table_stride = table_stride_;
  return a;
}

void CudaBackend::paged_attention(const KvLayerView& kv, const float* q, float* out,
                                  int32_t n_heads, float scale) {
  ProfileScope scope(profile_.get(), "paged_attention", n_tokens_);
  check_attention(kv);
  attention(attention_args(kv, q, out, n_heads, scale), nullptr);
}

void CudaBackend::attention(const PagedAttentionArgs& a, void* q8_dst) {
  const int32_t parts = attention_partitions(a);
  if (parts > 1) grow_pow2(attn_ws_, attention_workspace_bytes(a, parts), size_t{1} << 16);
  cuda::paged_attention(dev_, a, q8_dst, AttentionSplit{parts, attn_ws_.as<float>()});
}

void CudaBackend::attention_matmul(const KvLayerView& kv, const float* q, float* out,
                                   int32_t n_heads, float scale, int64_t rows,
                                   const MatmulOutput* outs, size_t n_outs) {
  ProfileScope scope(profile_.get(), "attention_matmul", rows, outs, n_outs);
  check_attention(kv);
  const int64_t cols = static_cast<int64_t>(n_heads) * kv.head_dim;
  if (rows != n_tokens_ || kv.head_dim % 32 != 0 || kv.v_dim > 0 ||
      !int8_inputs(rows, outs, n_outs) ||
      outs[0].w->n_in != cols)
    return Backend::attention_matmul(kv, q, out, n_heads, scale, rows, outs, n_outs);
  check_outputs(rows, outs, n_outs);
  // The attention kernel writes its output rows as int8 too: the
  // projection's input without a quantize launch of its own.
  attention(attention_args(kv, q, out, n_heads, scale), int8_buffer(rows, cols));
  products(nullptr, rows, outs, n_outs);
}

RecurrentBatch CudaBackend::device_batch(const RecurrentBatch& batch) {
  RecurrentBatch d;
  d.n_seqs = batch.n_seqs;
  // The step's batch (the runner's): its arrays came with begin_step's upload.
  if (d_token_begin_ && batch.n_seqs == step_recurrent_.n_seqs &&
      batch.token_begin == step_recurrent_.token_begin &&
      batch.state_slot == step_recurrent_.state_slot) {
    d.token_begin = d_token_begin_;
    d.state_slot = d_state_slot_;
    return d;
  }
  // Another one: uploaded now, which a recorded run could not replay.
  if (graphs_.recording())
    throw Error(fmt::format("{}: a recurrent batch other than the step's during a recorded step",
                            name_));
  const size_t S = static_cast<size_t>(std::max(batch.n_seqs, 0));
  rec_staging_.assign(batch.token_begin, batch.token_begin + S + 1);
  rec_staging_.insert(rec_staging_.end(), batch.state_slot, batch.state_slot + S);
  const size_t bytes = rec_staging_.size() * sizeof(int32_t);
  grow_pow2(rec_buf_, bytes, 4096);
  dev_.to_device(rec_buf_.data(), rec_staging_.data(), bytes);
  d.token_begin = rec_buf_.as<int32_t>();
  d.state_slot = d.token_begin + S + 1;
  return d;
}

void CudaBackend::ssm_conv(const SsmConvArgs& args, const RecurrentBatch& batch) {
  ProfileScope scope(profile_.get(), "ssm_conv", n_tokens_);
  if (batch.n_seqs == 0) return;
  cuda::ssm_conv(dev_, args, device_batch(batch));
}

void CudaBackend::gated_delta_rule(const GatedDeltaArgs& args, const RecurrentBatch& batch) {
  ProfileScope scope(profile_.get(), "gated_delta_rule", n_tokens_);
  if (batch.n_seqs == 0) return;
  // One block per (head, sequence), one thread per state column.
  if (args.d_v <= 0 || args.d_v > 1024 || args.d_k <= 0)
    throw Error(fmt::format("{}: gated_delta_rule takes head sizes d_k > 0, 0 < d_v <= 1024 (got "
                            "{}, {})",
                            name_, args.d_k, args.d_v));
  cuda::gated_delta_rule(dev_, args, device_batch(batch));
}

}  // namespace pagellm::cuda
