// What the peer-memory tests share besides the rank groups (tests/runtime/comm/RankGroup.h): the
// stand-in CUDA driver (tests/runtime/cuda/fake_cuda.c) and HIP runtime (tests/runtime/hip/fake_hip.c).
#pragma once

#include <cstdlib>
#include <ostream>

#include <gtest/gtest.h>

#include "runtime/cuda/CudaDriver.h"
#include "runtime/gpu/DeviceApi.h"
#include "runtime/hip/HipRuntime.h"
#include "tests/runtime/comm/RankGroup.h"

namespace m3idx::peer_tests {

using rank_tests::onRanks;

// The platform's loader pointed at a stand-in library by its variable (then unset again).
inline const runtime::DeviceApi &loadStandIn(const char *var, const char *library,
                                             StatusOr<const runtime::DeviceApi *> (*load)()) {
  ::setenv(var, library, 1);
  StatusOr<const runtime::DeviceApi *> api = load();
  ::unsetenv(var);
  EXPECT_TRUE(api.ok()) << api.status().message();
  return **api;
}
inline const runtime::DeviceApi &fakeDriver() { return loadStandIn("M3IDX_CUDA_LIBRARY", M3IDX_FAKE_CUDA, cuda::loadDriver); }
inline const runtime::DeviceApi &fakeHip() { return loadStandIn("M3IDX_HIP_LIBRARY", M3IDX_FAKE_HIP, hip::loadHipRuntime); }

// A stand-in platform: its DeviceApi and the variable that bounds its waits (milliseconds).
struct StandIn {
  const char *name;
  const runtime::DeviceApi &(*api)();
  const char *waitLimitVar;
};
inline const StandIn kStandIns[] = {{"Cuda", fakeDriver, "M3IDX_FAKE_CUDA_WAIT_MS"},
                                    {"Hip", fakeHip, "M3IDX_FAKE_HIP_WAIT_MS"}};
inline std::string standInName(const ::testing::TestParamInfo<StandIn> &info) { return info.param.name; }
inline void PrintTo(const StandIn &s, std::ostream *os) { *os << s.name; } // ctest's test names


} // namespace m3idx::peer_tests
