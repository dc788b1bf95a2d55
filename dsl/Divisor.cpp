#include "dsl/Divisor.h"

#include <bit>

#include <fmt/format.h>

namespace m3idx::dsl {

namespace {
constexpr std::string_view kWordSuffix = "_divisor_word";
}

std::string divisorWordName(const std::string &name) { return name + std::string(kWordSuffix); }

std::optional<std::string> divisorOfWordName(const std::string &name) {
  if (name.size() <= kWordSuffix.size() || !name.ends_with(kWordSuffix))
    return std::nullopt;
  return name.substr(0, name.size() - kWordSuffix.size());
}

StatusOr<int64_t> divisorWord(int64_t d) {
  if (d < 1 || d >= kDivisorLimit)
    return Status::error(fmt::format("a divisor must be in [1, 2^31), got {}", d));
  // l = ceil(log2 d); m = floor(2^32 (2^l - d) / d) + 1 < 2^32 (as 2^(l-1) < d < 2^31).
  const uint64_t ud = static_cast<uint64_t>(d);
  const int l = static_cast<int>(std::bit_width(ud - 1));
  const uint64_t m = (((uint64_t{1} << l) - ud) << 32) / ud + 1;
  return static_cast<int64_t>(m | (static_cast<uint64_t>(l) << 32));
}

} // namespace m3idx::dsl
