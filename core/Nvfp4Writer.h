// The writer side of NVFP4: quantize float key vectors into index-K page slots (SPEC §3 layout),
// so users and tests can build real caches from real vectors.
#pragma once

#include <cstdint>
#include <span>

#include "core/Status.h"

namespace m3idx::nvfp4 {

// Quantizes one token's 128 floats into the page at `page` (kPageBytes bytes), slot `slot`.
// Per 16-element group: scale = e4m3_rn_satfinite(max(amax, 1e-12) / 6) floored at 2^-9 (code
// 0x01); code = E2M1 round-to-nearest-even of x / scale, clamped to +-6. Non-finite input is an
// error: it has no NVFP4 encoding.
Status quantizeToken(std::span<const float> key, std::span<uint8_t> page, int slot);

// E2M1 code of x (round to nearest, ties to the even code, clamped to +-6). +0 for zero magnitude.
uint8_t e2m1RoundNearestEven(float x);

// Dequantizes token `slot` of a page into 128 floats of E4M3 key values (the values kernels use).
void dequantizeToken(std::span<const uint8_t> page, int slot, std::span<float> out);

} // namespace m3idx::nvfp4
