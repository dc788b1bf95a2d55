#include "core/Nvfp4Writer.h"

#include <cmath>

#include "core/Nvfp4.h"
#include "core/Spec.h"

namespace m3idx::nvfp4 {

uint8_t e2m1RoundNearestEven(float x) {
  uint8_t sign = x < 0 ? 8 : 0;
  float a = std::fabs(x);
  if (a >= 6.0f)
    return sign | 7;
  // Codes 0..7 are increasing; pick the nearest, ties to the even code.
  uint8_t best = 0;
  for (uint8_t c = 1; c < 8; ++c) {
    float dBest = std::fabs(a - kE2M1Magnitudes[best]);
    float d = std::fabs(a - kE2M1Magnitudes[c]);
    if (d < dBest || (d == dBest && (c & 1) == 0))
      best = c;
  }
  return best == 0 ? 0 : (sign | best);
}

Status quantizeToken(std::span<const float> key, std::span<uint8_t> page, int slot) {
  if (key.size() != spec::kIndexHeadDim)
    return invalidArgument("key", fmt::format("{} elements", spec::kIndexHeadDim), key.size());
  if (page.size() != spec::kPageBytes)
    return invalidArgument("page", fmt::format("{} bytes", spec::kPageBytes), page.size());
  if (slot < 0 || slot >= spec::kSparseBlockSize)
    return invalidArgument("slot", fmt::format("[0, {})", spec::kSparseBlockSize), slot);
  for (size_t d = 0; d < key.size(); ++d)
    if (!std::isfinite(key[d]))
      return invalidArgument(fmt::format("key[{}]", d), "a finite value", key[d]);

  uint8_t *data = page.data() + slot * spec::kDataBytesPerToken;
  uint8_t *scales = page.data() + spec::kPageDataBytes + slot * spec::kScalesPerToken;
  for (int g = 0; g < spec::kScalesPerToken; ++g) {
    float amax = 0.0f;
    for (int i = 0; i < spec::kScaleGroup; ++i)
      amax = std::fmax(amax, std::fabs(key[g * spec::kScaleGroup + i]));
    uint8_t scaleCode = e4m3RnSatfinite(std::fmax(amax, 1e-12f) / 6.0f);
    if (e4m3ToFloat(scaleCode) < std::ldexp(1.0f, -9))
      scaleCode = 0x01; // the floor 2^-9, the smallest positive E4M3
    scales[g] = scaleCode;
    float scale = e4m3ToFloat(scaleCode);
    for (int i = 0; i < spec::kScaleGroup; i += 2) {
      int d = g * spec::kScaleGroup + i;
      uint8_t lo = e2m1RoundNearestEven(key[d] / scale);
      uint8_t hi = e2m1RoundNearestEven(key[d + 1] / scale);
      data[d / 2] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
  return Status();
}

void dequantizeToken(std::span<const uint8_t> page, int slot, std::span<float> out) {
  const uint8_t *data = page.data() + slot * spec::kDataBytesPerToken;
  const uint8_t *scales = page.data() + spec::kPageDataBytes + slot * spec::kScalesPerToken;
  const auto &table = keyByteTable();
  for (int d = 0; d < spec::kIndexHeadDim; ++d) {
    uint8_t nibble = (data[d / 2] >> ((d & 1) * 4)) & 0xF;
    out[d] = e4m3ToFloat(table[nibble][scales[d / spec::kScaleGroup]]);
  }
}

} // namespace m3idx::nvfp4
