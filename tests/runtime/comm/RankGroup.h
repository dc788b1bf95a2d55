// What the multi-rank tests share: a group name no other test (or concurrent test process) uses,
// and a group of ranks run as threads, each with its own comm::FdExchange (the sockets do not know
// the difference from processes).
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "runtime/comm/FdExchange.h"

namespace m3idx::rank_tests {

inline std::string uniqueGroup() {
  static std::atomic<int> n{0};
  return fmt::format("t{}-{}", ::getpid(), n++);
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

} // namespace m3idx::rank_tests
