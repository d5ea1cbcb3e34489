// K-quant super-blocks of 256 elements: decoding of every K type, and the
// Q8_K encoder (the activation format of the K-quant dot products).
//
// Shared layout facts, with i the element index in the super-block:
//  - sub-block scales belong to elements i / 16 (Q2_K, Q3_K, Q6_K) or i / 32
//    (Q4_K, Q5_K);
//  - 2-bit fields (Q2_K, Q3_K low bits): element i sits in byte 32 * (i / 128)
//    + i % 32 of qs, at bit 2 * ((i % 128) / 32);
//  - 4-bit fields (Q4_K, Q5_K): byte 32 * (i / 64) + i % 32, low nibble for
//    (i % 64) < 32, high nibble otherwise;
//  - single high bits (Q3_K hmask, Q5_K qh): bit i / 32 of byte i % 32;
//  - Q6_K: low 4 bits in ql byte 64 * (i / 128) + i % 64 (low nibble for
//    (i % 128) < 64), high 2 bits in qh byte 32 * (i / 128) + i % 32 at bit
//    2 * ((i % 128) / 32).
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace pagellm::detail {

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = x[i].qs + 32 * half;
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {  // two sub-blocks of 16 per shift
          const uint8_t sc = x[i].scales[8 * half + shift + part];
          const float dl = d * static_cast<float>(sc & 0x0f);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l)
            *y++ = dl * static_cast<float>((q[16 * part + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    int bit = 0;  // hmask bit of the current 32 elements
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = x[i].qs + 32 * half;
      for (int shift = 0; shift < 8; shift += 2, ++bit) {
        for (int part = 0; part < 2; ++part) {
          const int sub = 8 * half + shift + part;
          const float dl = d * static_cast<float>(unpack_scale_q3_k(x[i].scales, sub));
          const uint8_t* hm = x[i].hmask + 16 * part;
          for (int l = 0; l < 16; ++l) {
            const int low = (q[16 * part + l] >> shift) & 3;
            const int v = low - (((hm[l] >> bit) & 1) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
    for (int chunk = 0; chunk < 4; ++chunk) {  // 64 elements: two sub-blocks
      const uint8_t* q = x[i].qs + 32 * chunk;
      int sc, m;
      unpack_scale_min_k4(x[i].scales, 2 * chunk, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      unpack_scale_min_k4(x[i].scales, 2 * chunk + 1, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
      y += 64;
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
    const uint8_t* qh = x[i].qh;
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8_t* q = x[i].qs + 32 * chunk;
      const int b1 = 2 * chunk, b2 = 2 * chunk + 1;  // qh bits of the two sub-blocks
      int sc, m;
      unpack_scale_min_k4(x[i].scales, b1, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      unpack_scale_min_k4(x[i].scales, b2, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        const int v = (q[l] & 0x0f) | (((qh[l] >> b1) & 1) << 4);
        y[l] = d1 * static_cast<float>(v) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const int v = (q[l] >> 4) | (((qh[l] >> b2) & 1) << 4);
        y[32 + l] = d2 * static_cast<float>(v) - m2;
      }
      y += 64;
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x[i].ql + 64 * half;
      const uint8_t* qh = x[i].qh + 32 * half;
      const int8_t* sc = x[i].scales + 8 * half;
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;
        const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[s]) * static_cast<float>(q0);
        y[l + 32] = d * static_cast<float>(sc[s + 2]) * static_cast<float>(q1);
        y[l + 64] = d * static_cast<float>(sc[s + 4]) * static_cast<float>(q2);
        y[l + 96] = d * static_cast<float>(sc[s + 6]) * static_cast<float>(q3);
      }
      y += 128;
    }
  }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK_K) {
    const float d = x[i].d;
    for (int j = 0; j < QK_K; ++j) y[j] = d * static_cast<float>(x[i].qs[j]);
  }
}

// Q8_K: the element of largest magnitude maps to -127 exactly (d = max / -127,
// kept as a float), the rest round to nearest (ties to even) and clamp at 127.
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    const float max = signed_absmax(x, QK_K);
    if (max == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; ++j)
      y[i].qs[j] = static_cast<int8_t>(clamp_int(nearest_int(iscale * x[j]), -128, 127));
    for (int g = 0; g < QK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace pagellm::detail
