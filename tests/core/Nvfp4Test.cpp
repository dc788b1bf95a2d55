// SPEC §2 numerics against values derived here independently (literal tables, a different decode
// formula and a nearest-code search), never by calling the function under test for expectations.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "core/Nvfp4.h"

using namespace m3idx::nvfp4;

namespace {

const double kE2M1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

bool isNaNCode(int c) { return (c & 0x7F) == 0x7F; }

// E4M3 magnitude of code 0..0x7E as an integer multiple of 2^-9 scaled: (8 + m) 2^(e - 10).
double independentE4M3(int code) {
  int e = (code >> 3) & 0xF, m = code & 7;
  double mag = e == 0 ? m / 512.0 : (8 + m) * std::pow(2.0, e - 10);
  return (code & 0x80) ? -mag : mag;
}

// Nearest finite E4M3 code by exhaustive search; ties to the even code; saturating.
uint8_t nearestE4M3(double x) {
  if (std::isnan(x))
    return 0x7F;
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  double a = std::fabs(x);
  if (a > 448.0)
    return sign | 0x7E;
  int best = 0;
  for (int c = 1; c <= 0x7E; ++c) {
    double d = std::fabs(independentE4M3(c) - a), db = std::fabs(independentE4M3(best) - a);
    if (d < db || (d == db && (c & 1) == 0))
      best = c;
  }
  return sign | static_cast<uint8_t>(best);
}

} // namespace

TEST(Nvfp4, E4M3DecodeMatchesIndependentFormula) {
  for (int c = 0; c < 256; ++c) {
    if (isNaNCode(c)) {
      EXPECT_TRUE(std::isnan(e4m3ToFloat(static_cast<uint8_t>(c)))) << c;
      continue;
    }
    EXPECT_EQ(e4m3ToFloat(static_cast<uint8_t>(c)), independentE4M3(c)) << c;
  }
  EXPECT_EQ(e4m3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(e4m3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::signbit(e4m3ToFloat(0x80)));
}

TEST(Nvfp4, E2M1Decode) {
  for (int n = 0; n < 16; ++n) {
    double want = (n & 8) ? -kE2M1[n & 7] : kE2M1[n & 7];
    EXPECT_EQ(e2m1ToFloat(static_cast<uint8_t>(n)), want) << n;
  }
  EXPECT_TRUE(std::signbit(e2m1ToFloat(8)));
}

TEST(Nvfp4, AllKeyBytesMatchIndependentDerivation) {
  int checked = 0;
  for (int n = 0; n < 16; ++n) {
    for (int s = 0; s < 256; ++s) {
      uint8_t want;
      if (isNaNCode(s)) {
        want = 0x7F;
      } else {
        double e2m1 = (n & 8) ? -kE2M1[n & 7] : kE2M1[n & 7];
        want = nearestE4M3(e2m1 * independentE4M3(s)); // exact in double
      }
      ASSERT_EQ(keyByte(static_cast<uint8_t>(n), static_cast<uint8_t>(s)), want)
          << "nibble " << n << " scale 0x" << std::hex << s;
      ASSERT_EQ(keyByteTable()[n][s], want);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4096);
}

TEST(Nvfp4, SatfiniteTiesGoToEvenCode) {
  EXPECT_EQ(e4m3RnSatfinite(1.0625f), 0x38);  // 1.0 | 1.125 -> 1.0 (m = 0)
  EXPECT_EQ(e4m3RnSatfinite(1.1875f), 0x3A);  // 1.125 | 1.25 -> 1.25 (m = 2)
  EXPECT_EQ(e4m3RnSatfinite(432.0f), 0x7E);   // 416 | 448 -> 448 (m = 6)
  EXPECT_EQ(e4m3RnSatfinite(-1.0625f), 0xB8);
  EXPECT_EQ(e4m3RnSatfinite(1.9375f), 0x40);  // 1.875 | 2.0 -> 2.0, carries into the exponent
}

TEST(Nvfp4, SatfiniteSubnormals) {
  EXPECT_EQ(e4m3RnSatfinite(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(e4m3RnSatfinite(std::ldexp(1.0f, -10)), 0x00); // 0 | 2^-9 tie -> 0
  EXPECT_EQ(e4m3RnSatfinite(std::ldexp(3.0f, -10)), 0x02); // 1 | 2 (x 2^-9) -> 2
  EXPECT_EQ(e4m3RnSatfinite(std::ldexp(15.0f, -10)), 0x08); // 7 | 8 -> 8: the smallest normal
  EXPECT_EQ(e4m3RnSatfinite(std::ldexp(1.0f, -6)), 0x08);
  EXPECT_EQ(e4m3RnSatfinite(std::ldexp(1.0f, -20)), 0x00);
  EXPECT_EQ(e4m3RnSatfinite(-std::ldexp(1.0f, -20)), 0x80);
}

TEST(Nvfp4, SatfiniteBoundaryInfNaNAndZero) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(e4m3RnSatfinite(448.0f), 0x7E);
  EXPECT_EQ(e4m3RnSatfinite(449.0f), 0x7E);
  EXPECT_EQ(e4m3RnSatfinite(464.0f), 0x7E);
  EXPECT_EQ(e4m3RnSatfinite(1e30f), 0x7E);
  EXPECT_EQ(e4m3RnSatfinite(-500.0f), 0xFE);
  EXPECT_EQ(e4m3RnSatfinite(inf), 0x7E);
  EXPECT_EQ(e4m3RnSatfinite(-inf), 0xFE);
  EXPECT_EQ(e4m3RnSatfinite(std::nanf("")), 0x7F);
  EXPECT_EQ(e4m3RnSatfinite(-std::nanf("")), 0x7F);
  EXPECT_EQ(e4m3RnSatfinite(0.0f), 0x00);
  EXPECT_EQ(e4m3RnSatfinite(-0.0f), 0x80);
  EXPECT_EQ(e4m3RnSatfinite(416.0f), 0x7D);
}

TEST(Nvfp4, SatfiniteMatchesSearchOnEveryCodeAndMidpoint) {
  for (int c = 0; c < 0x7E; ++c) {
    double lo = independentE4M3(c), hi = independentE4M3(c + 1);
    for (double x : {lo, (lo + hi) / 2, std::nextafter((lo + hi) / 2, 0.0),
                     std::nextafter((lo + hi) / 2, 1e9)}) {
      float xf = static_cast<float>(x);
      EXPECT_EQ(e4m3RnSatfinite(xf), nearestE4M3(xf)) << x;
      EXPECT_EQ(e4m3RnSatfinite(-xf), nearestE4M3(-static_cast<double>(xf))) << -x;
    }
  }
}
