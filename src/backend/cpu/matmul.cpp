#include "backend/cpu/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "backend/cpu/activation_quant.h"
#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/packed_weights.h"
#include "util/error.h"

namespace pagellm::cpu {

namespace {

// Weight bytes per row tile when several activation rows are multiplied: the
// tile is re-read from L2 once per group of activation rows.
constexpr size_t kTileBytes = 128 * 1024;
// Output rows per scheduling unit for the thread split.
constexpr int64_t kRowGrain = 16;

}  // namespace

MatmulScratch::~MatmulScratch() {
  std::free(data_);
}

void* MatmulScratch::reserve(size_t bytes) {
  if (bytes <= capacity_) return data_;
  size_t cap = std::max(bytes, capacity_ + capacity_ / 2);
  cap = (cap + 63) & ~size_t{63};
  void* p = std::aligned_alloc(64, cap);
  if (!p) throw std::bad_alloc();
  std::free(data_);
  data_ = p;
  capacity_ = cap;
  return data_;
}

namespace {

// Row t of x transformed into out.
void transform_row(const float* x_row, int64_t t, int64_t n, const RowTransform& tr, float* out) {
  if (tr.up) {
    std::copy(x_row, x_row + n, out);
    glu(tr.act, out, tr.up + t * tr.up_stride, n);
  } else {
    rms_norm(x_row, tr.weight, out, 1, n, tr.eps);
  }
}

// Row t of x (at x_row), transformed into this thread's buffer when
// `transform` is given.
const float* source_row(const float* x_row, int64_t t, int64_t n, const RowTransform* transform) {
  if (!transform) return x_row;
  thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  transform_row(x_row, t, n, *transform, buf.data());
  return buf.data();
}

}  // namespace

ActivationRows quantize_activations(DType weight_type, const float* x, int64_t x_stride,
                                    int64_t rows, int64_t n, ThreadPool& pool,
                                    MatmulScratch& scratch, CpuIsa isa,
                                    const RowTransform* transform) {
  ActivationRows a;
  a.dot_type = dot_type(weight_type);
  a.n = n;
  a.rows = rows;
  if (a.dot_type == DType::F32 && !transform) {
    a.data = x;
    a.row_stride = static_cast<size_t>(x_stride) * sizeof(float);
    return a;
  }
  if (a.dot_type == DType::F32) {
    // Float activations: the transformed rows themselves.
    a.row_stride = (static_cast<size_t>(n) * sizeof(float) + 63) & ~size_t{63};
    auto* dst = static_cast<uint8_t*>(scratch.reserve(a.row_stride * static_cast<size_t>(rows)));
    a.data = dst;
    pool.parallel_for(rows, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t)
        transform_row(x + t * x_stride, t, n, *transform,
                      reinterpret_cast<float*>(dst + static_cast<size_t>(t) * a.row_stride));
    });
    return a;
  }
  const size_t row_bytes = activation_row_bytes(weight_type, n);
  a.row_stride = (row_bytes + 63) & ~size_t{63};
  auto* dst = static_cast<uint8_t*>(scratch.reserve(a.row_stride * static_cast<size_t>(rows)));
  a.data = dst;
  struct Ctx {
    DType wt;
    const float* x;
    int64_t x_stride, n;
    uint8_t* dst;
    size_t stride;
    CpuIsa isa;
    const RowTransform* transform;
  } ctx{weight_type, x, x_stride, n, dst, a.row_stride, isa, transform};
  pool.parallel_for(rows, [c = &ctx](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t)
      quantize_activation_row(c->wt, source_row(c->x + t * c->x_stride, t, c->n, c->transform),
                              c->dst + t * c->stride, c->n, c->isa);
  });
  return a;
}

size_t activation_stride(const WeightMatrix& w) {
  size_t row = activation_row_bytes(w.type, w.n_in);
  if (w.layout == WeightLayout::Rows16 && dot_type(w.type) != DType::F32)
    row = dot_type(w.type) == DType::Q8_K ? split_q8_k_row_bytes(w.n_in)
                                          : split_q8_0_row_bytes(w.n_in);
  return (row + 63) & ~size_t{63};
}

ActivationRows quantize_activations(const WeightMatrix& w, const float* x, int64_t x_stride,
                                    int64_t rows, ThreadPool& pool, MatmulScratch& scratch,
                                    CpuIsa isa, const RowTransform* transform) {
  if (w.layout == WeightLayout::Rows)
    return quantize_activations(w.type, x, x_stride, rows, w.n_in, pool, scratch, isa, transform);
  if (!packable(w.type))
    throw Error(std::string("no Rows16 layout for weight type ") + dtype_name(w.type));
  if (dot_type(w.type) == DType::F32) {  // F16 / BF16: float rows, as for row-major weights
    ActivationRows a =
        quantize_activations(w.type, x, x_stride, rows, w.n_in, pool, scratch, isa, transform);
    a.for_layout = WeightLayout::Rows16;
    return a;
  }
  ActivationRows a;
  a.dot_type = dot_type(w.type);
  a.for_layout = WeightLayout::Rows16;
  a.n = w.n_in;
  a.rows = rows;
  a.row_stride = activation_stride(w);
  auto* dst = static_cast<uint8_t*>(scratch.reserve(a.row_stride * static_cast<size_t>(rows)));
  a.data = dst;
  struct Ctx {
    const float* x;
    int64_t x_stride, n;
    uint8_t* dst;
    size_t stride;
    CpuIsa isa;
    bool k;
    const RowTransform* transform;
  } ctx{x, x_stride, w.n_in, dst, a.row_stride, isa, a.dot_type == DType::Q8_K, transform};
  pool.parallel_for(rows, [c = &ctx](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      const float* src = source_row(c->x + t * c->x_stride, t, c->n, c->transform);
      if (c->k)
        quantize_split_q8_k_row(src, c->dst + t * c->stride, c->n, c->isa);
      else
        quantize_split_q8_0_row(src, c->dst + t * c->stride, c->n, c->isa);
    }
  });
  return a;
}

namespace {

void matmul_rows16(const WeightMatrix& w, const ActivationRows& x, float* y, int64_t y_stride,
                   ThreadPool& pool, CpuIsa isa) {
  if (x.for_layout != WeightLayout::Rows16)
    throw Error("matmul: Rows16 weights need activations quantized for them");
  if (w.row_stride != packed_group_bytes(w.type, w.n_in))
    throw Error("matmul: Rows16 weights with a group stride other than packed_group_bytes");
  const detail::PackedTileFn fn = detail::packed_tile_fn(w.type, isa);
  if (!fn)
    throw Error(std::string("no Rows16 kernel for ") + dtype_name(w.type) + " (" + isa_name(isa) +
                ")");
  const int64_t groups = (w.n_out + kPackRows - 1) / kPackRows;
  struct Ctx {
    detail::PackedTileFn fn;
    const WeightMatrix* w;
    const ActivationRows* x;
    float* y;
    int64_t y_stride;
  } ctx{fn, &w, &x, y, y_stride};
  pool.parallel_for(groups, [c = &ctx](int64_t g0, int64_t g1, int) {
    const WeightMatrix& m = *c->w;
    const int64_t r0 = g0 * kPackRows;
    const int64_t rows = std::min(m.n_out, g1 * kPackRows) - r0;
    c->fn(m.n_in, static_cast<const uint8_t*>(m.data) + static_cast<size_t>(g0) * m.row_stride,
          m.row_stride, rows, static_cast<const uint8_t*>(c->x->data), c->x->row_stride, c->x->rows,
          c->y + r0, c->y_stride);
  });
}

}  // namespace

void matmul(const WeightMatrix& w, const ActivationRows& x, float* y, int64_t y_stride,
            ThreadPool& pool, CpuIsa isa) {
  if (x.dot_type != dot_type(w.type))
    throw Error(std::string("activations are ") + dtype_name(x.dot_type) + ", weights of type " +
                dtype_name(w.type) + " need " + dtype_name(dot_type(w.type)));
  if (x.n != w.n_in)
    throw Error("matmul: activation length " + std::to_string(x.n) + " != weight row length " +
                std::to_string(w.n_in));
  if (x.rows <= 0 || w.n_out <= 0) return;
  if (w.layout == WeightLayout::Rows16) return matmul_rows16(w, x, y, y_stride, pool, isa);
  if (x.for_layout != WeightLayout::Rows)
    throw Error("matmul: activations quantized for Rows16 weights, weights are row-major");

  const size_t row_bytes = std::max<size_t>(dtype_row_bytes(w.type, w.n_in), 1);
  int64_t tile_rows = static_cast<int64_t>(kTileBytes / row_bytes);
  tile_rows = std::max<int64_t>(kRowGrain, tile_rows / kRowGrain * kRowGrain);
  const detail::DotTileFn tile = detail::dot_tile_fn(w.type, w.n_in, isa);

  struct Ctx {
    detail::DotTileFn tile;
    const WeightMatrix* w;
    const ActivationRows* x;
    float* y;
    int64_t y_stride, tile_rows;
  } ctx{tile, &w, &x, y, y_stride, x.rows == 1 ? w.n_out : tile_rows};
  pool.parallel_for(
      w.n_out,
      [c = &ctx](int64_t b, int64_t e, int) {
        const auto* wd = static_cast<const uint8_t*>(c->w->data);
        for (int64_t r = b; r < e; r += c->tile_rows) {
          const int64_t nr = std::min(c->tile_rows, e - r);
          c->tile(c->w->n_in, wd + static_cast<size_t>(r) * c->w->row_stride, c->w->row_stride, nr,
                  static_cast<const uint8_t*>(c->x->data), c->x->row_stride, c->x->rows, c->y + r,
                  c->y_stride);
        }
      },
      kRowGrain);
}

namespace {

void run_epilogue(const MatmulJob& j, int64_t r0, int64_t r1) {
  j.epilogue->fn(j.epilogue->ctx, j.y, j.y_stride, j.x->rows, r0, r1);
}

}  // namespace

void matmul_many(const MatmulJob* jobs, size_t n_jobs, ThreadPool& pool, CpuIsa isa) {
  // Rows16 jobs: one range of 16-row groups over all of them, in job order.
  struct Part {
    const MatmulJob* job;
    detail::PackedTileFn fn;
    int64_t first_group;  // in the combined range
    int64_t groups;
  };
  std::vector<Part> parts;
  int64_t total = 0;
  for (size_t i = 0; i < n_jobs; ++i) {
    const MatmulJob& j = jobs[i];
    const bool packed = j.w->layout == WeightLayout::Rows16 &&
                        j.x->for_layout == WeightLayout::Rows16 &&
                        j.x->dot_type == dot_type(j.w->type) && j.x->n == j.w->n_in &&
                        j.w->row_stride == packed_group_bytes(j.w->type, j.w->n_in);
    const detail::PackedTileFn fn = packed ? detail::packed_tile_fn(j.w->type, isa) : nullptr;
    if (!fn || j.x->rows <= 0 || j.w->n_out <= 0) {
      matmul(*j.w, *j.x, j.y, j.y_stride, pool, isa);  // checks and runs (or throws) alone
      if (j.epilogue && j.x->rows > 0 && j.w->n_out > 0) run_epilogue(j, 0, j.w->n_out);
      continue;
    }
    const int64_t groups = (j.w->n_out + kPackRows - 1) / kPackRows;
    parts.push_back({&j, fn, total, groups});
    total += groups;
  }
  if (parts.empty()) return;
  pool.parallel_for(total, [&parts](int64_t b, int64_t e, int) {
    for (const Part& p : parts) {
      const int64_t g0 = std::max(b, p.first_group) - p.first_group;
      const int64_t g1 = std::min(e, p.first_group + p.groups) - p.first_group;
      if (g0 >= g1) continue;
      const WeightMatrix& m = *p.job->w;
      const ActivationRows& x = *p.job->x;
      const int64_t r0 = g0 * kPackRows;
      const int64_t r1 = std::min(m.n_out, g1 * kPackRows);
      p.fn(m.n_in, static_cast<const uint8_t*>(m.data) + static_cast<size_t>(g0) * m.row_stride,
           m.row_stride, r1 - r0, static_cast<const uint8_t*>(x.data), x.row_stride, x.rows,
           p.job->y + r0, p.job->y_stride);
      if (p.job->epilogue) run_epilogue(*p.job, r0, r1);  // while the rows are in cache
    }
  });
}

void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t rows, float* y,
            int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch, CpuIsa isa) {
  ActivationRows a = quantize_activations(w, x, x_stride, rows, pool, scratch, isa);
  matmul(w, a, y, y_stride, pool, isa);
}

}  // namespace pagellm::cpu
