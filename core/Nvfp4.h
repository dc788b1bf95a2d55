// Scalar NVFP4 numerics of SPEC §2: E2M1 and E4M3 decode, e4m3_rn_satfinite, and the key rule
// k = e4m3_rn_satfinite(E2M1(nibble) * E4M3(scale)). The scalar truth all backends must match.
#pragma once

#include <array>
#include <cstdint>

namespace m3idx::nvfp4 {

// Magnitudes of E2M1 codes 0..7; bit 3 is the sign.
inline constexpr std::array<float, 8> kE2M1Magnitudes = {0.0f, 0.5f, 1.0f, 1.5f,
                                                         2.0f, 3.0f, 4.0f, 6.0f};
inline constexpr uint8_t kE4M3Max = 0x7E;  // 448
inline constexpr uint8_t kE4M3NaN = 0x7F;
inline constexpr float kE4M3MaxValue = 448.0f;

float e2m1ToFloat(uint8_t nibble);
float e4m3ToFloat(uint8_t byte);

// Round to nearest, ties to even code; |x| > 448 and +-inf saturate to +-448; NaN -> 0x7F;
// +-0 keeps its sign.
uint8_t e4m3RnSatfinite(float x);

// The E4M3 byte of one key element.
uint8_t keyByte(uint8_t nibble, uint8_t scale);

// 16 x 256 table of keyByte, indexed [nibble][scale]; built once.
const std::array<std::array<uint8_t, 256>, 16> &keyByteTable();
// 256-entry E4M3 -> float table; built once.
const std::array<float, 256> &e4m3Table();

} // namespace m3idx::nvfp4
