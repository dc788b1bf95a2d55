// A grow-only device buffer over a DeviceApi: steady-state steps reuse it without allocating.
// Uninitialised (kernels write every entry they later read), or zeroed when it grows (kernels that
// leave what they read at zero). Growing waits for the device first, as work in flight may still
// use the old buffer.
#pragma once

#include <algorithm>
#include <cstdint>

#include "runtime/gpu/DeviceApi.h"

namespace m3idx::runtime {

class DeviceScratch {
public:
  explicit DeviceScratch(const DeviceApi *api) : api_(api) {}
  ~DeviceScratch() {
    if (ptr_)
      api_->free(ptr_);
  }
  DeviceScratch(const DeviceScratch &) = delete;
  DeviceScratch &operator=(const DeviceScratch &) = delete;

  // A buffer of at least `bytes` (4 when 0, so every kernel argument is a real address).
  StatusOr<uint64_t> ensure(size_t bytes) { return grow(bytes, /*zeroed=*/false); }
  // The same, all zero when it grows (the zeroing is done before this returns).
  StatusOr<uint64_t> ensureZeroed(size_t bytes) { return grow(bytes, /*zeroed=*/true); }
  uint64_t ptr() const { return ptr_; }
  // Whether ensure(bytes) returns without allocating.
  bool holds(size_t bytes) const { return std::max<size_t>(bytes, 4) <= capacity_; }
  int64_t allocations() const { return allocations_; }

private:
  StatusOr<uint64_t> grow(size_t bytes, bool zeroed) {
    bytes = std::max<size_t>(bytes, 4);
    if (bytes <= capacity_)
      return ptr_;
    if (ptr_) {
      M3IDX_RETURN_IF_ERROR(api_->check(api_->synchronize(), "synchronize (scratch growth)"));
      M3IDX_RETURN_IF_ERROR(api_->check(api_->free(ptr_), "memory free"));
      ptr_ = 0;
      capacity_ = 0;
    }
    M3IDX_RETURN_IF_ERROR(api_->check(api_->alloc(&ptr_, bytes), "memory allocation"));
    capacity_ = bytes;
    ++allocations_;
    if (zeroed) {
      M3IDX_RETURN_IF_ERROR(api_->check(api_->memsetAsync(ptr_, 0, bytes, nullptr), "memset"));
      M3IDX_RETURN_IF_ERROR(api_->check(api_->synchronize(), "synchronize (scratch zeroing)"));
    }
    return ptr_;
  }

  const DeviceApi *api_;
  uint64_t ptr_ = 0;
  size_t capacity_ = 0;
  int64_t allocations_ = 0;
};

} // namespace m3idx::runtime
