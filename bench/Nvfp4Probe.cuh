// What the NVFP4 probes under bench/ share: SPEC §3 pages of random codes and finite scales, the
// per-scale key table (the 8 positive E2M1 magnitudes times each E4M3 scale, rounded to E4M3 as
// SPEC §2 says), the table-and-prmt decode of 8 codes that score_decode's lowering runs, an E4M3
// pair widened to f16 (exact), and E4M3's value on the host.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>

namespace probe {

constexpr int kPageBytes = 9216, kDataBytes = 8192;

__device__ __host__ inline uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return static_cast<uint32_t>(x ^ (x >> 33));
}

// Pages: random nibbles, scales in [0x20, 0x5f] (finite, 2^-4 .. 2^3.9).
__global__ void fillPages(uint8_t *kv, size_t bytes) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t h = mix(i * 0x9E3779B97F4A7C15ULL + 1);
    kv[i] = (i % kPageBytes) < kDataBytes ? uint8_t(h) : uint8_t(0x20 + h % 0x40);
  }
}

// Key bytes of the 8 positive E2M1 codes times each E4M3 scale, rounded to E4M3 (satfinite).
__global__ void fillTable(uint8_t *table) {
  const int s = blockIdx.x, c = threadIdx.x;
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(s), __NV_E4M3);
  table[s * 8 + c] = __nv_cvt_float_to_fp8(mags[c] * __half2float(__half(h)), __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
  return r;
}

// 8 packed E2M1 codes -> 8 E4M3 key bytes (elements 0-3, 4-7), as score_decode does.
__device__ __forceinline__ void decodeWord(uint32_t x, uint2 tab, uint32_t &o0, uint32_t &o1) {
  const uint32_t codes = x & 0x77777777u, even = x << 4;
  o0 = prmt(tab.x, tab.y, codes) ^ (prmt(even, x, 0xD9C8) & 0x80808080u);
  o1 = prmt(tab.x, tab.y, codes >> 16) ^ (prmt(even, x, 0xFBEA) & 0x80808080u);
}

// E4M3 bytes 2 * half and 2 * half + 1 of `word` as an f16 pair (exact).
__device__ __forceinline__ uint32_t f16Pair(uint32_t word, int half) {
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> (16 * half)), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}

inline float e4m3(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float v = e ? std::ldexp(1.0f + m / 8.0f, e - 7) : std::ldexp(m / 8.0f, -6);
  return (b & 0x80) ? -v : v;
}

} // namespace probe
