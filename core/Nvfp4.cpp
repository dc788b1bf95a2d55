#include "core/Nvfp4.h"

#include <bit>
#include <cmath>

namespace m3idx::nvfp4 {

float e2m1ToFloat(uint8_t nibble) {
  float m = kE2M1Magnitudes[nibble & 7];
  return (nibble & 8) ? -m : m;
}

float e4m3ToFloat(uint8_t byte) {
  int exp = (byte >> 3) & 0xF;
  int man = byte & 7;
  float mag;
  if (exp == 0xF && man == 7)
    return std::nanf("");
  if (exp == 0)
    mag = std::ldexp(static_cast<float>(man), -9);
  else
    mag = std::ldexp(1.0f + man / 8.0f, exp - 7);
  return (byte & 0x80) ? -mag : mag;
}

uint8_t e4m3RnSatfinite(float x) {
  if (std::isnan(x))
    return kE4M3NaN;
  uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  double a = std::fabs(static_cast<double>(x));
  if (a >= kE4M3MaxValue) // includes +-inf
    return sign | kE4M3Max;
  // Below the smallest normal (2^-6) the grid is uniform in steps of 2^-9: code == m.
  if (a < std::ldexp(1.0, -6)) {
    double m = std::nearbyint(a * 512.0); // default rounding mode: ties to even
    return sign | static_cast<uint8_t>(m); // m == 8 is code 0x08, the smallest normal
  }
  int e;
  double frac = std::frexp(a, &e); // a = frac * 2^e, frac in [0.5, 1)
  e -= 1;                          // a = (2*frac) * 2^e, 2*frac in [1, 2)
  double m = std::nearbyint((2.0 * frac - 1.0) * 8.0);
  if (m == 8.0) {
    m = 0.0;
    e += 1;
  }
  // a < 448 so e <= 8, and e == 8 gives m <= 6 (464 would need m == 7 but rounds from > 448).
  return sign | static_cast<uint8_t>(((e + 7) << 3) | static_cast<int>(m));
}

uint8_t keyByte(uint8_t nibble, uint8_t scale) {
  // E2M1 has at most 2 significant bits and E4M3 4: the fp32 product is exact.
  return e4m3RnSatfinite(e2m1ToFloat(nibble) * e4m3ToFloat(scale));
}

const std::array<std::array<uint8_t, 256>, 16> &keyByteTable() {
  static const auto table = [] {
    std::array<std::array<uint8_t, 256>, 16> t{};
    for (int n = 0; n < 16; ++n)
      for (int s = 0; s < 256; ++s)
        t[n][s] = keyByte(static_cast<uint8_t>(n), static_cast<uint8_t>(s));
    return t;
  }();
  return table;
}

const std::array<float, 256> &e4m3Table() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b)
      t[b] = e4m3ToFloat(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

} // namespace m3idx::nvfp4
