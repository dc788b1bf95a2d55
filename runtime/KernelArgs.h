// Packs arguments for a JIT-compiled host kernel in MLIR's C-interface convention: each buffer
// as a rank-1 memref descriptor, then the scalars, then the program-id range.
#pragma once

#include <cstdint>
#include <vector>

namespace m3idx::lowering {
class HostKernel;
}

namespace m3idx::runtime {

// Layout of MLIR's ranked memref descriptor for rank 1 (StridedMemRefType<T, 1> in
// mlir/ExecutionEngine/CRunnerUtils.h), written out here so the runtime needs no MLIR headers.
struct MemRef1D {
  const void *allocated;
  const void *aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
};

class KernelArgs {
public:
  template <typename T> KernelArgs &buffer(const T *data, int64_t elements) {
    buffers_.push_back(MemRef1D{data, data, 0, elements, 1});
    return *this;
  }
  KernelArgs &scalar(int64_t v) {
    scalars_.push_back(v);
    return *this;
  }
  // Runs programs [begin, end). Safe to call from several threads at once.
  void call(const lowering::HostKernel &kernel, int64_t begin, int64_t end) const;

private:
  std::vector<MemRef1D> buffers_;
  std::vector<int64_t> scalars_;
};

} // namespace m3idx::runtime
