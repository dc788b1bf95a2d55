// Division by a divisor a kernel reads from its arguments, as a multiply and two shifts
// (Granlund & Montgomery's round-up method, "Division by Invariant Integers using
// Multiplication", 1994; CUTLASS's FastDivmod is the same idea). GPUs have no integer divider: a
// 64-bit `/` by an argument lowers to about 25 dependent instructions and a branch to its 32-bit
// form, and a decode program's prologue waited through five of them between its seq_len and its
// block table (bench/RESULTS.md, 2026-12-05 (4)). The host computes each divisor's word once per
// launch (kernels::bindLaunch), beside the value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/Status.h"

namespace m3idx::dsl {

// Divisors a word exists for: [1, kDivisorLimit).
inline constexpr int64_t kDivisorLimit = int64_t{1} << 31;
// Numerators the word divides exactly: [0, kNumeratorLimit).
inline constexpr int64_t kNumeratorLimit = int64_t{1} << 32;

// The scalar argument that carries divisor argument `name`'s word, and the divisor a word
// argument's name belongs to (nullopt for any other name).
std::string divisorWordName(const std::string &name);
std::optional<std::string> divisorOfWordName(const std::string &name);

// d's word: bits [0, 32) a multiplier m, bits [32, 38) a shift l, such that for every n in
// [0, kNumeratorLimit): n / d == (((n * m) >> 32) + n) >> l, all unsigned in 64 bits. An error
// names d outside [1, kDivisorLimit).
StatusOr<int64_t> divisorWord(int64_t d);

} // namespace m3idx::dsl
