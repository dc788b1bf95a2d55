// What the peer-memory tests share besides the rank groups (tests/runtime/comm/RankGroup.h): the
// stand-in CUDA driver (tests/runtime/cuda/fake_cuda.c).
#pragma once

#include <cstdlib>

#include <gtest/gtest.h>

#include "runtime/cuda/CudaDriver.h"
#include "runtime/gpu/DeviceApi.h"
#include "tests/runtime/comm/RankGroup.h"

namespace m3idx::peer_tests {

using rank_tests::onRanks;

inline const runtime::DeviceApi &fakeDriver() {
  ::setenv("M3IDX_CUDA_LIBRARY", M3IDX_FAKE_CUDA, 1);
  StatusOr<const runtime::DeviceApi *> api = cuda::loadDriver();
  ::unsetenv("M3IDX_CUDA_LIBRARY");
  EXPECT_TRUE(api.ok()) << api.status().message();
  return **api;
}

} // namespace m3idx::peer_tests
