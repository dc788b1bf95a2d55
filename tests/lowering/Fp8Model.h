// Host models of the E4M3 conversions GPU instructions perform, written from the OCP FP8 format
// alone (not from core/Nvfp4), for the numerics tests of the gfx950 and sm_90 decode sequences.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace m3idx::testing {

// OCP E4M3FN to float: bias 7, subnormals m * 2^-9, S.1111.111 is NaN, no infinity.
inline float e4m3Value(uint8_t byte) {
  const int e = (byte >> 3) & 15, m = byte & 7;
  float mag;
  if (e == 15 && m == 7)
    mag = std::numeric_limits<float>::quiet_NaN();
  else
    mag = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return (byte & 0x80) ? -mag : mag;
}

// Round to the nearest E4M3 value by search over every finite code, ties to the even code; sign
// kept (also for zero). `saturate`: |x| beyond 448 gives +-448 (satfinite); otherwise magnitudes
// at or past 464 (448 + half an ulp) give NaN. NaN gives 0x7F with the input's sign.
inline uint8_t e4m3Round(double x, bool saturate) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x))
    return sign | 0x7F;
  if (std::fabs(x) >= 464.0)
    return sign | (saturate ? 0x7E : 0x7F);
  const double a = std::fabs(x);
  int best = 0;
  double bestErr = std::numeric_limits<double>::infinity();
  for (int code = 0; code <= 0x7E; ++code) {
    const double err = std::fabs(e4m3Value(static_cast<uint8_t>(code)) - a);
    if (err < bestErr || (err == bestErr && code % 2 == 0)) {
      best = code;
      bestErr = err;
    }
  }
  return sign | static_cast<uint8_t>(best);
}

inline bool isE4m3NaN(uint8_t b) { return (b & 0x7F) == 0x7F; }

} // namespace m3idx::testing
