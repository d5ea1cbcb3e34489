// The per-lane pieces of the int8 tensor-core matrix product (mmq.h), shared
// by its kernel and its host rendition (needs nvcc; compiled for the host too,
// where the host rendition runs them lane by lane and emulates the mma).
//
// The instruction: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (PTX ISA,
// "Matrix Fragments for mma.m16n8k32"), lane = 4 g + t:
//   A 16 x 32 (weights, row = output row): a0 row g, k 4t .. 4t+3; a1 row g+8,
//     the same k; a2 row g, k 16+4t ..; a3 row g+8, k 16+4t ..
//   B 32 x 8 (activations, col = token):   b0 col g, k 4t ..; b1 col g, k 16+4t ..
//   C 16 x 8 s32:                          c0, c1 row g, cols 2t, 2t+1;
//                                          c2, c3 row g+8, cols 2t, 2t+1
// One mma is one 32-element block of 16 rows against 8 tokens: the exact
// integer sums the CPU's and the GEMV's dot products make per block. A sum
// does not depend on the order of its elements, only on both operands using
// the same one, so k slots 4t .. hold word 2t of the block (elements 8t ..
// 8t+3) and k slots 16+4t .. word 2t+1: a lane's two words of a row, or of a
// token, are one 8-byte load.
//
// Per warp and round (kRoundElems elements of 16 rows; mmq.h):
//   stage   the rows' GGUF bytes, copied with coalesced loads
//   words   [16][kWordStride] u32: the codes as signed bytes (Unit<T>::load,
//           Q4_0 / Q5_0 codes shifted to their signed values)
//   scales  [16][kBlocks] float2 per 32-element block: {ws, wm}, the value of
//           an element being ws * code + wm (Q6_K: {ws of the first 16
//           elements, ws of the last 16}, wm 0)
//   tx      [kBlocks][64] f32: each token's block scale dx; txs, for the types
//           with a wm: dx * (sum of the token's codes in the block)
// and per block and 8-token tile: acc += (ws dx) S [+ wm (dx sum_x)], S the
// mma's integer sum (Q6_K: one mma per half block, with the other half's
// weights zeroed).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "backend/cuda/dp4a_units.cuh"

namespace pagellm::cuda::detail {

constexpr int kMmqRows = 16;               // weight rows per warp (and CUDA block)
constexpr int kMmqWarps = 4;               // a CUDA block's warps share out the rounds
constexpr int kMmqTokens = 64;             // tokens per CUDA block
constexpr int kMmqTiles = kMmqTokens / 8;  // mma n-tiles per block
constexpr int kMmqRedStride = 20;          // floats per token in the cross-warp sum
                                           // (20: the lanes' stores hit distinct banks)

template <DType T>
struct MmqType {
  using U = Unit<T>;
  static constexpr int kRoundElems = U::kElems * U::kPerBlock >= 256 ? 256 : 128;
  static constexpr int kBlocks = kRoundElems / 32;        // 32-element blocks per round
  static constexpr int kUnits = kRoundElems / U::kElems;  // units per row per round
  static constexpr int kRoundBytes = kRoundElems / (U::kElems * U::kPerBlock) * U::kBlockBytes;
  static constexpr bool kMin =
      T == DType::Q4_1 || T == DType::Q5_1 || T == DType::Q4_K || T == DType::Q5_K;
  static constexpr bool kHalves = T == DType::Q6_K;
  // Words per row in shared memory: == 8 (mod 32), so a half-warp's 8-byte
  // fragment loads (rows g, words 2t, 2t + 1) fall in distinct banks.
  static constexpr int kWordStride = kRoundElems / 4 + 8;

  // A warp's shared memory, in bytes (16-byte multiples).
  static constexpr int kWordsBytes = kMmqRows * kWordStride * 4;
  static constexpr int kScalesBytes = kMmqRows * kBlocks * 8;
  static constexpr int kStageBytes = (kMmqRows * kRoundBytes + 15) / 16 * 16;
  static constexpr int kTokenBytes = (kMin ? 2 : 1) * kBlocks * kMmqTokens * 4;
  // The stage is dead once the words are expanded: the token scales reuse it.
  static constexpr int kUnionBytes = kStageBytes > kTokenBytes ? kStageBytes : kTokenBytes;
  static constexpr int kWarpBytes = kWordsBytes + kScalesBytes + kUnionBytes;
  static constexpr int kRedBytes = kMmqWarps * kMmqTokens * kMmqRedStride * 4;
  static constexpr int kBlockBytes =
      kMmqWarps * kWarpBytes > kRedBytes ? kMmqWarps* kWarpBytes : kRedBytes;
};

// A warp's views of its shared memory.
struct MmqWarpMem {
  uint8_t* stage;
  uint32_t* words;
  float2* scales;
  float* tx;
  float* txs;
};
template <DType T>
__host__ __device__ __forceinline__ MmqWarpMem mmq_warp_mem(uint8_t* base) {
  using M = MmqType<T>;
  MmqWarpMem m;
  m.words = reinterpret_cast<uint32_t*>(base);
  m.scales = reinterpret_cast<float2*>(base + M::kWordsBytes);
  m.stage = base + M::kWordsBytes + M::kScalesBytes;
  m.tx = reinterpret_cast<float*>(m.stage);
  m.txs = m.tx + M::kBlocks * kMmqTokens;
  return m;
}

// What a round of a warp covers.
struct MmqRound {
  const uint8_t* w;  // row 0 of the matrix
  size_t row_bytes;
  int64_t rows;   // of the matrix (rows past it read its last row; not stored)
  int64_t r0;     // the warp's first row
  int64_t round;  // index: elements round * kRoundElems ..
  int blocks;     // 32-element blocks of the round inside the row (<= kBlocks)
  bool aligned4;  // rows and rounds start 4-byte aligned: whole rounds copy words
};

// The bytes of the round's blocks of each row: lane's share of the copy.
template <DType T>
__host__ __device__ __forceinline__ void mmq_stage(int lane, const MmqRound& rd, uint8_t* stage) {
  using M = MmqType<T>;
  using U = Unit<T>;
  // Whole GGUF blocks: the round's 32-element blocks (a K type's round is one
  // super-block).
  const int bytes = rd.blocks * 32 / (U::kElems * U::kPerBlock) * U::kBlockBytes;
  const bool by4 =
      rd.aligned4 && static_cast<size_t>(rd.round) * M::kRoundBytes % 4 == 0 && bytes % 4 == 0;
  const int per_row = by4 ? bytes / 4 : bytes / 2;
  for (int i = lane; i < kMmqRows * per_row; i += 32) {
    const int r = i / per_row, j = i % per_row;
    const int64_t row = rd.r0 + r < rd.rows ? rd.r0 + r : rd.rows - 1;
    const uint8_t* src = rd.w + static_cast<size_t>(row) * rd.row_bytes +
                         static_cast<size_t>(rd.round) * M::kRoundBytes;
    if (by4)
      reinterpret_cast<uint32_t*>(stage + r * M::kRoundBytes)[j] =
          reinterpret_cast<const uint32_t*>(src)[j];
    else
      reinterpret_cast<uint16_t*>(stage + r * M::kRoundBytes)[j] =
          reinterpret_cast<const uint16_t*>(src)[j];
  }
}

// Bytes b in [0, 2 off) of a word as the signed bytes b - off.
__host__ __device__ __forceinline__ uint32_t minus_offset_word(uint32_t q, uint32_t off) {
  return ((q | 0x80808080u) - off * 0x01010101u) ^ 0x80808080u;
}

// The 8 words of a 32-element block to dst (16-byte aligned): two 16-byte
// stores on the device (one word at a time, lanes 8 words apart would meet in
// 4 banks).
__host__ __device__ __forceinline__ void store_words8(uint32_t* dst, const uint32_t (&q)[8]) {
#ifdef __CUDA_ARCH__
  reinterpret_cast<uint4*>(dst)[0] = make_uint4(q[0], q[1], q[2], q[3]);
  reinterpret_cast<uint4*>(dst)[1] = make_uint4(q[4], q[5], q[6], q[7]);
#else
  memcpy(dst, q, 32);
#endif
}

// Lane's share of the expansion: units of the staged rows into words and
// scales (units past the round's blocks are left alone: never read).
template <DType T>
__host__ __device__ __forceinline__ void mmq_expand(int lane, int blocks, const MmqWarpMem& m) {
  using M = MmqType<T>;
  using U = Unit<T>;
  constexpr int kPerLane = kMmqRows * M::kUnits / 32;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int j = lane + 32 * k;
    const int r = j / M::kUnits, u = j % M::kUnits;
    if (u * U::kElems >= blocks * 32) continue;
    U wu;
    wu.load(m.stage + r * M::kRoundBytes, u);
    uint32_t* words = m.words + r * M::kWordStride;
    float2* scales = m.scales + r * M::kBlocks;
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        store_words8(words + (2 * u + h) * 8, wu.q[h]);
        // d sc and dmin m: an f16 times a 6-bit integer, exact in f32.
        scales[2 * u + h] = make_float2(PAGELLM_MUL_RN(wu.d, static_cast<float>(wu.sc[h])),
                                        -PAGELLM_MUL_RN(wu.dmin, static_cast<float>(wu.mn[h])));
      }
    } else if constexpr (T == DType::Q6_K) {
      store_words8(words + u * 8, wu.q);
      scales[u] = make_float2(PAGELLM_MUL_RN(wu.d, static_cast<float>(wu.sc[0])),
                              PAGELLM_MUL_RN(wu.d, static_cast<float>(wu.sc[1])));
    } else {
      if constexpr (U::kOffset != 0) {
#pragma unroll
        for (int i = 0; i < 8; ++i) wu.q[i] = minus_offset_word(wu.q[i], U::kOffset);
      }
      store_words8(words + u * 8, wu.q);
      if constexpr (M::kMin)
        scales[u] = make_float2(wu.d, wu.m);
      else
        scales[u] = make_float2(wu.d, 0.0f);
    }
  }
}

// The round's activation side: token tok0 + i (clamped to the last of n)
// in tile slot i.
struct MmqTokens {
  Q8ActView x;
  int64_t tok0;
  int64_t n;
};
__host__ __device__ __forceinline__ int64_t mmq_token(const MmqTokens& tk, int i) {
  return tk.tok0 + i < tk.n ? tk.tok0 + i : tk.n - 1;
}

// Lane's share of the round's token scales.
template <DType T>
__host__ __device__ __forceinline__ void mmq_token_scales(int lane, const MmqTokens& tk,
                                                          int64_t block0, int blocks,
                                                          const MmqWarpMem& m) {
  using M = MmqType<T>;
  const int64_t nb = tk.x.cols / 32;
  for (int i = lane; i < blocks * kMmqTokens; i += 32) {
    const int b = i / kMmqTokens, s = i % kMmqTokens;
    const int64_t at = mmq_token(tk, s) * nb + block0 + b;
    const float dx = tk.x.d[at];
    m.tx[i] = dx;
    if constexpr (M::kMin) m.txs[i] = PAGELLM_MUL_RN(dx, static_cast<float>(tk.x.sum[at]));
  }
}

// Lane's A fragment of block b: rows g and g + 8, words 2t and 2t + 1.
template <DType T>
__host__ __device__ __forceinline__ void mmq_load_a(int lane, int b, const MmqWarpMem& m,
                                                    uint32_t (&a)[4]) {
  using M = MmqType<T>;
  const int g = lane / 4, t = lane % 4;
  const uint32_t* lo = m.words + g * M::kWordStride + b * 8 + 2 * t;
  const uint32_t* hi = lo + 8 * M::kWordStride;
#ifdef __CUDA_ARCH__
  const uint2 l = *reinterpret_cast<const uint2*>(lo);
  const uint2 h = *reinterpret_cast<const uint2*>(hi);
  a[0] = l.x, a[2] = l.y, a[1] = h.x, a[3] = h.y;
#else
  a[0] = lo[0], a[2] = lo[1], a[1] = hi[0], a[3] = hi[1];
#endif
}

// Q6_K: the A fragment of half `half` of the block (elements 16 half ..
// 16 half + 15, words 4 half .. 4 half + 3: the lanes with t / 2 == half),
// the other half's weights zero.
__host__ __device__ __forceinline__ void mmq_half_a(int lane, int half, const uint32_t (&a)[4],
                                                    uint32_t (&out)[4]) {
  const bool keep = (lane % 4) / 2 == half;
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = keep ? a[i] : 0u;
}

// Lane's B fragment of block `block` (of the row) for tile j: token slot
// 8 j + g, words 2t and 2t + 1.
__host__ __device__ __forceinline__ void mmq_load_b(int lane, const MmqTokens& tk, int64_t block,
                                                    int j, uint32_t (&b)[2]) {
  const int g = lane / 4, t = lane % 4;
  const int8_t* p = tk.x.qs + mmq_token(tk, 8 * j + g) * tk.x.cols + 32 * block + 8 * t;
#ifdef __CUDA_ARCH__
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  b[0] = v.x, b[1] = v.y;
#else
  memcpy(b, p, 8);
#endif
}

// c = A B for the warp's fragments (zero accumulator).
__device__ __forceinline__ void mma_s8(const uint32_t (&a)[4], const uint32_t (&b)[2],
                                       int (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0), "r"(0), "r"(0),
        "r"(0));
#else
  __trap();  // the library is built for sm_80 and newer only
#endif
}

// The same for the 32 lanes' fragments on the host, by the layout above.
inline void mma_s8_host(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], int (&c)[32][4]) {
  auto byte = [](uint32_t w, int i) {
    return static_cast<int>(static_cast<int8_t>(static_cast<uint8_t>(w >> (8 * i))));
  };
  int A[16][32], B[32][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      A[g][4 * t + i] = byte(a[lane][0], i);
      A[g + 8][4 * t + i] = byte(a[lane][1], i);
      A[g][16 + 4 * t + i] = byte(a[lane][2], i);
      A[g + 8][16 + 4 * t + i] = byte(a[lane][3], i);
      B[4 * t + i][g] = byte(b[lane][0], i);
      B[16 + 4 * t + i][g] = byte(b[lane][1], i);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int e = 0; e < 4; ++e) {
      int s = 0;
      for (int k = 0; k < 32; ++k) s += A[rows[e]][k] * B[k][cols[e]];
      c[lane][e] = s;
    }
  }
}

// acc (lane's four elements of tile j) += block b's sums c: element e is row
// g (e < 2) or g + 8, token slot 8 j + 2t + e % 2. For Q6_K, c is the first
// half's sums and c1 the second's.
template <DType T>
__host__ __device__ __forceinline__ void mmq_epilogue(int lane, int b, int j, const MmqWarpMem& m,
                                                      const int (&c)[4], const int (&c1)[4],
                                                      float (&acc)[4]) {
  using M = MmqType<T>;
  const int g = lane / 4, t = lane % 4;
  const float2 s[2] = {m.scales[g * M::kBlocks + b], m.scales[(g + 8) * M::kBlocks + b]};
  const int slot = b * kMmqTokens + 8 * j + 2 * t;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 ws = s[e / 2];
    const float dx = m.tx[slot + e % 2];
    if constexpr (M::kHalves) {
      acc[e] = fma_rn(PAGELLM_MUL_RN(ws.x, dx), static_cast<float>(c[e]), acc[e]);
      acc[e] = fma_rn(PAGELLM_MUL_RN(ws.y, dx), static_cast<float>(c1[e]), acc[e]);
    } else {
      acc[e] = fma_rn(PAGELLM_MUL_RN(ws.x, dx), static_cast<float>(c[e]), acc[e]);
      if constexpr (M::kMin) acc[e] = fma_rn(ws.y, m.txs[slot + e % 2], acc[e]);
    }
  }
}

// Where lane's element e of tile j goes in the cross-warp sum: red[token
// slot][row] (row fastest), kMmqRedStride floats per token.
__host__ __device__ __forceinline__ int mmq_red_index(int lane, int j, int e) {
  const int g = lane / 4, t = lane % 4;
  return (8 * j + 2 * t + e % 2) * kMmqRedStride + g + 8 * (e / 2);
}

}  // namespace pagellm::cuda::detail
