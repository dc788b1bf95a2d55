// Errors as values for every m3idx library boundary (m3idx/Status.h) and the one message shape
// SPEC §7 asks for. Kept free of LLVM so the GPU runtime can be built where no LLVM is installed.
#pragma once

#include <fmt/format.h>

#include "m3idx/Status.h"

namespace m3idx {

// The one message shape SPEC §7 asks for: the argument, the expected and the actual value.
template <typename E, typename A>
Status invalidArgument(std::string_view argument, const E &expected, const A &actual) {
  return Status::error(fmt::format("{}: expected {}, got {}", argument, expected, actual));
}

} // namespace m3idx
#define M3IDX_RETURN_IF_ERROR(expr)                                                                \
  do {                                                                                             \
    ::m3idx::Status m3idx_status_ = (expr);                                                        \
    if (!m3idx_status_.ok())                                                                       \
      return m3idx_status_;                                                                        \
  } while (0)
