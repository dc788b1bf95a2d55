// `m3idx cache-bench`: per kernel, the latency of each way to obtain it: cold compile, disk-cache
// hit (read, verify, then link on the host or load into the driver on a GPU; a fresh in-memory
// store or backend each time) and in-memory hit; with --host-cpu, cold host compiles for another
// CPU model.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "kernels_src/KernelCatalog.h"
#include "tuning/TargetTuning.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/Backend.h"
#include "runtime/KernelStore.h"
#include "runtime/gpu/GpuBackend.h"
#include "tools/Commands.h"

namespace m3idx::cli {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A kernel cache of this run's own, so that every first get is a compile; removed at the end.
class PrivateCache {
public:
  PrivateCache() : dir_(std::filesystem::temp_directory_path() / fmt::format("m3idx-cache-bench-{}", ::getpid())) {
    std::filesystem::remove_all(dir_);
    ::setenv("M3IDX_CACHE_DIR", dir_.c_str(), 1);
  }
  ~PrivateCache() { std::filesystem::remove_all(dir_); }

private:
  std::filesystem::path dir_;
};

struct BenchRow {
  kernels::KernelKind kind;
  kernels::KernelConfig config;
  const char *form; // "" for the host's own configs
};

// Every config a host step of `heads` heads uses, then sm_90's prefill form (which the tests run
// on the host against the reference): compile time of both is a product figure.
std::vector<BenchRow> benchRows(int heads) {
  std::vector<BenchRow> rows;
  for (kernels::KernelKind kind : kernels::allKernels())
    rows.push_back({kind, tuning::hostTuning().configFor(kind, heads, 4), ""});
  rows.push_back({kernels::KernelKind::ScorePrefill,
                  (*tuning::tuningFor("sm_90"))->configFor(kernels::KernelKind::ScorePrefill, heads, 4),
                  "sm_90 form"});
  return rows;
}

void printHeader(const std::string &what, int heads, int repeat) {
  std::cout << fmt::format("kernel cache latency, {}, heads={}, median of {} (disk) runs\n", what, heads,
                           repeat);
  std::cout << fmt::format("{:<14} {:<56} {:>14} {:>14} {:>16}\n", "kernel", "config", "cold compile",
                           "disk hit", "in-memory hit");
}

void printRow(kernels::KernelKind kind, const std::string &config, double compileMs,
              const std::vector<double> &disk, double nsPerHit) {
  std::cout << fmt::format("{:<14} {:<56} {:>11.1f} ms {:>11.3f} ms {:>13.1f} ns\n", kernels::kernelName(kind),
                           config, compileMs, median(disk), nsPerHit);
}

std::string rowName(const BenchRow &r) {
  return *r.form ? fmt::format("{} ({})", r.config.str(), r.form) : r.config.str();
}

// Cold compiles for another CPU model: objects only (this machine may lack their instructions).
int runForCpu(int heads, const std::string &cpu) {
  std::cout << fmt::format("cold compile for CPU {} (object only), heads={}\n", cpu, heads);
  std::cout << fmt::format("{:<14} {:<56} {:>14} {:>12}\n", "kernel", "config", "cold compile", "object");
  for (const BenchRow &r : benchRows(heads)) {
    auto k = kernels::buildKernel(r.kind, r.config);
    if (!k.ok())
      return fail(k.status().message());
    lowering::HostCompileStats stats;
    auto object = lowering::compileHostObject(*k, &stats, cpu);
    if (!object.ok())
      return fail(object.status().message());
    std::cout << fmt::format("{:<14} {:<56} {:>11.1f} ms {:>9} KB\n", kernels::kernelName(r.kind), rowName(r),
                             stats.totalMs(), (object->bytes.size() + 1023) / 1024);
  }
  return 0;
}

// A GPU backend's kernels (its own prefill form): cold = DSL -> code object in process plus the
// driver's load, disk hit = a fresh backend reading the entry and loading it, memory hit = the
// backend asking again.
int runGpuCacheBench(const std::string &backendName, int repeat, int heads) {
  PrivateCache cache;
  auto first = runtime::makeBackend(backendName);
  if (!first.ok())
    return fail(first.status().message());
  auto *cold = dynamic_cast<runtime::GpuBackend *>(first->get());
  if (!cold)
    return fail(fmt::format("--backend: expected host, cuda or hip, got '{}'", backendName));
  printHeader(fmt::format("{} on {}", backendName, cold->deviceName()), heads, repeat);
  for (kernels::KernelKind kind : kernels::allKernels()) {
    const kernels::KernelConfig config = cold->tuning().configFor(kind, heads, 4);
    auto t0 = Clock::now();
    if (Status s = cold->prepare(kind, config); !s.ok())
      return fail(s.message());
    const double compileMs = msSince(t0);
    std::vector<double> disk;
    for (int i = 0; i < repeat; ++i) {
      auto fresh = runtime::makeBackend(backendName);
      if (!fresh.ok())
        return fail(fresh.status().message());
      t0 = Clock::now();
      if (Status s = dynamic_cast<runtime::GpuBackend &>(**fresh).prepare(kind, config); !s.ok())
        return fail(s.message());
      disk.push_back(msSince(t0));
    }
    constexpr int kLookups = 100000;
    t0 = Clock::now();
    for (int i = 0; i < kLookups; ++i)
      if (!cold->prepare(kind, config).ok())
        return fail("cache bench: in-memory lookup failed");
    printRow(kind, config.str(), compileMs, disk, msSince(t0) * 1e6 / kLookups);
  }
  return 0;
}

int runCacheBench(int repeat, int heads) {
  PrivateCache cache;
  printHeader("host target", heads, repeat);
  for (const BenchRow &r : benchRows(heads)) {
    runtime::KernelStore cold;
    auto first = cold.get(r.kind, r.config);
    if (!first.ok())
      return fail(first.status().message());
    const double compileMs = cold.records().back().compile.totalMs();
    std::vector<double> disk;
    for (int i = 0; i < repeat; ++i) {
      runtime::KernelStore fresh;
      auto t0 = Clock::now();
      auto k = fresh.get(r.kind, r.config);
      disk.push_back(msSince(t0));
      if (!k.ok() || fresh.records().back().source != runtime::KernelSource::DiskCache)
        return fail("cache bench: expected a disk-cache hit");
    }
    constexpr int kLookups = 1000000;
    auto t0 = Clock::now();
    for (int i = 0; i < kLookups; ++i)
      if (!cold.get(r.kind, r.config).ok())
        return fail("cache bench: in-memory lookup failed");
    printRow(r.kind, rowName(r), compileMs, disk, msSince(t0) * 1e6 / kLookups);
  }
  return 0;
}

} // namespace

void addCacheBenchCommand(CLI::App &app, Runner &run) {
  auto repeat = std::make_shared<int>(50);
  auto heads = std::make_shared<int>(4);
  auto cpu = std::make_shared<std::string>();
  auto backend = std::make_shared<std::string>("host");
  CLI::App *cmd = app.add_subcommand("cache-bench",
                                     "Time cold compile, disk-cache hit and in-memory hit per kernel");
  cmd->add_option("--repeat", *repeat, "Disk hits timed per kernel")->capture_default_str();
  cmd->add_option("--heads", *heads, "num_index_heads of the configs")->capture_default_str();
  cmd->add_option("--host-cpu", *cpu,
                  "Only time cold compiles, for this LLVM CPU model (e.g. x86-64-v3: AVX2, no AVX-512)");
  cmd->add_option("--backend", *backend, "host, cuda or hip (a GPU: its own configs, the driver's load included)")
      ->capture_default_str();
  cmd->callback([&run, repeat, heads, cpu, backend] {
    run = [repeat, heads, cpu, backend] {
      if (*repeat < 1) // a median of no runs
        return fail(invalidArgument("--repeat", ">= 1", *repeat).message());
      if (!cpu->empty())
        return runForCpu(*heads, *cpu);
      return *backend == "host" ? runCacheBench(*repeat, *heads) : runGpuCacheBench(*backend, *repeat, *heads);
    };
  });
}

} // namespace m3idx::cli
