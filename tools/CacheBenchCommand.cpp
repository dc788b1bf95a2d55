// `m3idx cache bench`: per kernel, the latency of each way to obtain it on the host target: cold
// compile, disk-cache hit (read, verify, link; a fresh in-memory store each time) and in-memory hit.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "kernels_src/KernelCatalog.h"
#include "runtime/KernelStore.h"
#include "tools/Commands.h"

namespace m3idx::cli {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int runCacheBench(int repeat, int heads) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("m3idx-cache-bench-{}", ::getpid());
  fs::remove_all(dir);
  ::setenv("M3IDX_CACHE_DIR", dir.c_str(), 1); // a private cache: every first get is a compile
  std::cout << fmt::format("kernel cache latency, host target, heads={}, median of {} (disk) and "
                           "1e6 (memory) runs\n",
                           heads, repeat);
  std::cout << fmt::format("{:<14} {:<16} {:>14} {:>14} {:>16}\n", "kernel", "config",
                           "cold compile", "disk hit", "in-memory hit");
  for (kernels::KernelKind kind : kernels::allKernels()) {
    const kernels::KernelConfig config = kernels::configFor(kind, heads, 4);
    runtime::KernelStore cold;
    auto first = cold.get(kind, config);
    if (!first.ok())
      return fail(first.status().message());
    const double compileMs = cold.records().back().compile.totalMs();
    std::vector<double> disk;
    for (int i = 0; i < repeat; ++i) {
      runtime::KernelStore fresh;
      auto t0 = Clock::now();
      auto k = fresh.get(kind, config);
      disk.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (!k.ok() || fresh.records().back().source != runtime::KernelSource::DiskCache)
        return fail("cache bench: expected a disk-cache hit");
    }
    constexpr int kLookups = 1000000;
    auto t0 = Clock::now();
    for (int i = 0; i < kLookups; ++i)
      if (!cold.get(kind, config).ok())
        return fail("cache bench: in-memory lookup failed");
    const double nsPerHit =
        std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kLookups;
    std::cout << fmt::format("{:<14} {:<16} {:>11.1f} ms {:>11.3f} ms {:>13.1f} ns\n",
                             kernels::kernelName(kind), config.str(), compileMs, median(disk),
                             nsPerHit);
  }
  fs::remove_all(dir);
  return 0;
}

} // namespace

void addCacheBenchCommand(CLI::App &app, Runner &run) {
  auto repeat = std::make_shared<int>(50);
  auto heads = std::make_shared<int>(4);
  CLI::App *cmd = app.add_subcommand("cache-bench",
                                     "Time cold compile, disk-cache hit and in-memory hit per kernel");
  cmd->add_option("--repeat", *repeat, "Disk hits timed per kernel")->capture_default_str();
  cmd->add_option("--heads", *heads, "num_index_heads of the configs")->capture_default_str();
  cmd->callback([&run, repeat, heads] { run = [repeat, heads] { return runCacheBench(*repeat, *heads); }; });
}

} // namespace m3idx::cli
