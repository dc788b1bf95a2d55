// A grow-only host buffer: steady-state steps reuse it without allocating or clearing. Uninitialised
// (kernels write every entry they later read), or zeroed when it grows (kernels that leave what
// they read at zero, as the top-k's arrival counts).
#pragma once

#include <cstdint>
#include <memory>

namespace m3idx::runtime {

template <typename T> class GrowBuffer {
public:
  T *ensure(int64_t n) { return grow(n, /*zeroed=*/false); }
  T *ensureZeroed(int64_t n) { return grow(n, /*zeroed=*/true); } // zero when it grows
  T *data() const { return data_.get(); }
  int64_t allocations() const { return allocations_; }

private:
  T *grow(int64_t n, bool zeroed) {
    if (n > capacity_) {
      data_.reset(zeroed ? new T[n]() : new T[n]);
      capacity_ = n;
      ++allocations_;
    }
    return data_.get();
  }

  std::unique_ptr<T[]> data_;
  int64_t capacity_ = 0;
  int64_t allocations_ = 0;
};

} // namespace m3idx::runtime
