// `m3idx bench`: time indexer steps on a case folder with one backend: median and spread of many
// steps after a warm-up, GB/s of index-K read, and the JIT compile time of each kernel used; on GPU
// backends the launches by CUDA / HIP events after an L2 flush, each kernel, and the device copy.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <vector>

#include "casefile/CaseFile.h"
#include "core/Spec.h"
#include "runtime/Backend.h"
#include "runtime/HostBackend.h"
#include "runtime/ThreadPool.h"
#include "runtime/gpu/GpuBackend.h"
#include "tools/Commands.h"

namespace m3idx::cli {

namespace {

struct BenchArgs {
  std::string caseDir, backend = "host";
  int repeat = 20, warmup = 2;
};

// Bytes of index-K a step must read: every visible token's 64 data + 8 scale bytes, once per
// request (all rows and heads of a request share one read).
int64_t indexKBytes(const BatchView &b) {
  int64_t tokens = 0;
  for (int64_t i = 0; i < b.numRequests; ++i)
    tokens += b.seqLens[i];
  return tokens * (spec::kDataBytesPerToken + spec::kScalesPerToken);
}

int runBench(const BenchArgs &a) {
  StatusOr<Case> c = loadCase(a.caseDir);
  if (!c.ok())
    return fail(c.status().message());
  StatusOr<std::unique_ptr<runtime::Backend>> backend = runtime::makeBackend(a.backend);
  if (!backend.ok())
    return fail(backend.status().message());
  if (a.repeat < 1 || a.warmup < 0)
    return fail(fmt::format("--repeat/--warmup: expected >= 1 / >= 0, got {} / {}", a.repeat,
                            a.warmup));
  const BatchView v = c->view();
  using Clock = std::chrono::steady_clock;
  // GPU backends: the launches timed by events on the stream after an L2 flush (uploads and
  // downloads are not part of a step in an engine); the host and the reference: the whole call.
  auto *gpu = dynamic_cast<runtime::GpuBackend *>(backend->get());
  std::map<std::string, std::vector<double>> perKernel;
  auto step = [&]() -> StatusOr<double> {
    runtime::RunOptions options;
    options.flushL2 = gpu != nullptr;
    auto t0 = Clock::now();
    StatusOr<IndexerOutput> out = (*backend)->run(v, options);
    if (!out.ok())
      return out.status();
    if (!gpu)
      return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    for (const auto &[name, ms] : gpu->lastKernelBreakdown())
      perKernel[name].push_back(ms);
    return gpu->lastKernelMs();
  };
  StatusOr<double> first = step(); // compiles on the host backend
  if (!first.ok())
    return fail(first.status().message());
  for (int i = 1; i < a.warmup; ++i)
    (void)step();
  perKernel.clear(); // warm-up steps are not reported
  std::vector<double> ms;
  for (int i = 0; i < a.repeat; ++i) {
    StatusOr<double> t = step();
    if (!t.ok())
      return fail(t.status().message());
    ms.push_back(*t);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const int64_t bytes = indexKBytes(v);
  std::cout << fmt::format("case {}: H={} requests={} (decode {} x {} rows) rows={} index-K {:.1f} MB\n",
                           a.caseDir, v.params.numHeads, v.numRequests, v.params.numDecodes,
                           v.params.decodeQueryLen, v.numRows, bytes / 1e6);
  std::cout << fmt::format("backend {} ({} threads): median {:.3f} ms/step (min {:.3f}, max {:.3f}, "
                           "{} steps), {:.2f} GB/s of index-K; first step {:.1f} ms\n",
                           a.backend, a.backend == "host" ? runtime::hostThreads() : 1, median,
                           ms.front(), ms.back(), ms.size(), bytes / (median * 1e6), *first);
  if (gpu) {
    for (auto &[name, t] : perKernel) {
      std::sort(t.begin(), t.end());
      std::cout << fmt::format("  {:<14} {:.3f} ms (median, in sequence)\n", name, t[t.size() / 2]);
    }
    StatusOr<double> copy = gpu->copyBandwidthGBs(std::max<int64_t>(bytes, int64_t{256} << 20), 20);
    if (copy.ok())
      std::cout << fmt::format("  device copy {:.0f} GB/s (read + write, the step's bytes): the step "
                               "reads index-K at {:.1f}% of it\n",
                               *copy, 100.0 * bytes / (median * 1e6) / *copy);
  }
  if (auto *host = dynamic_cast<runtime::HostBackend *>(backend->get()))
    for (const runtime::KernelRecord &r : host->kernelRecords())
      std::cout << fmt::format("  {:<14} {:<16} {:<10} compile {:7.1f} ms (emit {:.1f}, pipeline "
                               "{:.1f}, LLVM {:.1f}), load {:.2f} ms\n",
                               r.kernel, r.config, runtime::sourceName(r.source), r.compile.totalMs(),
                               r.compile.emitMs, r.compile.pipelineMs, r.compile.jitMs, r.loadMs);
  return 0;
}

} // namespace

void addBenchCommand(CLI::App &app, Runner &run) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App *cmd = app.add_subcommand("bench", "Time indexer steps on a case with one backend");
  cmd->add_option("CASE", args->caseDir, "Case folder (make one with m3idx gen)")->required();
  cmd->add_option("--backend", args->backend, "ref, host, cuda or hip")->capture_default_str();
  cmd->add_option("--repeat", args->repeat, "Timed steps (the median is reported)")
      ->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "Untimed steps first")->capture_default_str();
  cmd->callback([&run, args] { run = [args] { return runBench(*args); }; });
}

} // namespace m3idx::cli
