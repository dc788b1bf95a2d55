// What the peer-memory tests share: the stand-in CUDA driver (tests/runtime/cuda/fake_cuda.c), a
// group name no other test uses, and a group of ranks run as threads, each with its own exchange.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/comm/FdExchange.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/gpu/DeviceApi.h"

namespace m3idx::peer_tests {

inline const runtime::DeviceApi &fakeDriver() {
  ::setenv("M3IDX_CUDA_LIBRARY", M3IDX_FAKE_CUDA, 1);
  StatusOr<const runtime::DeviceApi *> api = cuda::loadDriver();
  ::unsetenv("M3IDX_CUDA_LIBRARY");
  EXPECT_TRUE(api.ok()) << api.status().message();
  return **api;
}

inline std::string uniqueGroup() {
  static std::atomic<int> n{0};
  return fmt::format("pg{}-{}", ::getpid(), n++);
}

// Runs body(rank, exchange) -> error text ("" when fine) on `world` threads connected as one group.
template <typename Body> std::vector<std::string> onRanks(int world, Body body) {
  const std::string group = uniqueGroup();
  std::vector<std::string> errors(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      auto x = comm::FdExchange::connect(group, r, world, std::chrono::seconds(10));
      errors[r] = x.ok() ? body(r, **x) : x.status().message();
    });
  for (std::thread &t : ranks)
    t.join();
  return errors;
}

} // namespace m3idx::peer_tests
