// m3idx-cuda-check: runs case folders on the CUDA backend with PTX made elsewhere (no LLVM here, so
// it builds on a GPU machine with only the driver) and checks every output against the scalar
// reference: exact-valued cases bit for bit (scores by value), others within the fp32 summation
// bound up to near-tie swaps. Usage: m3idx-cuda-check PTX_DIR CASE... ; exit 1 on any mismatch.
// `m3idx-cuda-check PTX_DIR --bench|--bench-prefill REQUESTS TOKENS HEADS [--check]` generates a
// decode step (or REQUESTS prompts of TOKENS tokens) of that
// size on the spot, times it (CUDA events, median of 25 after two warm-ups, L2 flushed before
// each), with --check checks it against the reference (minutes on the CPU at 256 x 128K), and
// prints the ratio to the device's copy bandwidth (the step's bytes, events) measured in the same
// run. `m3idx-cuda-check PTX_DIR --bench-cp REQUESTS TOKENS HEADS WORLD`
// checks and times one decode-CP rank's share of a step (see benchDecodeCp).
// `m3idx-cuda-check PTX_DIR --indexer CASE...` runs the cases through the Indexer API instead (q,
// kv and top-k in device buffers, metadata on the host, forward() on the stream);
// `--indexer-bench REQUESTS TOKENS HEADS` times forward() of a decode step against the backend's
// own launches in the same run, block table on the host and on the device (see benchIndexer).
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>

#include <algorithm>

#include "casefile/CaseFile.h"
#include "casefile/CaseGenerator.h"
#include "reference/ReferenceIndexer.h"
#include "reference/TopkCheck.h"
#include "runtime/api/DeviceCaseRun.h"
#include "runtime/api/IndexerEngine.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/CudaDriver.h"

using namespace m3idx;

namespace {

// Median of `runs` timed runs (after a warm-up, L2 flushed before each) of the kernels `options`
// launch, per kernel.
std::map<std::string, double> medianKernelMs(runtime::GpuBackend &backend, const BatchView &v,
                                             runtime::RunOptions options, int runs) {
  options.flushL2 = true;
  std::map<std::string, std::vector<double>> perKernel;
  for (int i = 0; i <= runs; ++i) {
    auto got = backend.run(v, options);
    if (!got.ok()) {
      std::cerr << got.status().message() << "\n";
      std::exit(1);
    }
    if (i > 0)
      for (auto &[name, t] : backend.lastKernelBreakdown())
        perKernel[name].push_back(t);
  }
  std::map<std::string, double> out;
  for (auto &[name, t] : perKernel) {
    std::sort(t.begin(), t.end());
    out[name] = t[t.size() / 2];
  }
  return out;
}

StatusOr<Case> decodeStep(int requests, int64_t tokens, int heads) {
  GenOptions o;
  o.seed = 7;
  o.mode = ValueMode::Exact;
  o.numHeads = heads;
  o.extraPages = 0;
  o.numDecodes = requests;
  o.decodeContext = {tokens, tokens};
  o.numPrefills = 0;
  return generateCase(o);
}

// One decode-CP rank's work on one GPU (SPEC §6; 4 GPUs are not lent): the rank scores every
// world-th block for all world x heads heads of the group (after the query all-gather), then, its
// head's row complete after the all-to-all, selects the top-k as a local step does. Checked: the
// share's scores equal the full scoring's bit for bit on every rank's blocks. Timed: the share's
// score kernel vs a local step (all blocks, its own heads), per kernel, medians of 20.
int benchDecodeCp(runtime::GpuBackend &backend, int requests, int64_t tokens, int heads, int world) {
  StatusOr<Case> group = decodeStep(requests, tokens, heads * world), local = decodeStep(requests, tokens, heads);
  if (!group.ok() || !local.ok()) {
    std::cerr << (group.ok() ? local.status() : group.status()).message() << "\n";
    return 1;
  }
  const BatchView g = group->view();
  runtime::RunOptions full;
  full.keepScores = true;
  auto all = backend.run(g, full);
  if (!all.ok()) {
    std::cerr << all.status().message() << "\n";
    return 1;
  }
  int64_t compared = 0, differing = 0;
  for (int r = 0; r < world; ++r) {
    runtime::RunOptions share = full;
    share.decodeBlockBegin = r;
    share.decodeBlockStep = world;
    auto got = backend.run(g, share);
    if (!got.ok()) {
      std::cerr << got.status().message() << "\n";
      return 1;
    }
    const int64_t T = all->numRows, W = all->scoreWidth;
    for (int64_t h = 0; h < all->numHeads; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t blk = r; blk < W; blk += world) {
          const float a = all->scores[(h * T + t) * W + blk], b = got->scores[(h * T + t) * W + blk];
          if (std::isnan(a) && std::isnan(b))
            continue; // past the row's blocks (both NaN-filled) or a NaN dot
          ++compared;
          differing += std::memcmp(&a, &b, 4) != 0;
        }
  }
  std::cout << fmt::format("CP shares of {} ranks: {} scores compared with the full scoring, {} differ\n",
                           world, compared, differing);
  runtime::RunOptions share;
  share.decodeBlockStep = world;
  const auto cp = medianKernelMs(backend, g, share, 20);
  const auto own = medianKernelMs(backend, local->view(), runtime::RunOptions{}, 20);
  double localMs = 0, topkMs = 0;
  for (auto &[name, t] : own) {
    localMs += t;
    if (name.rfind("topk", 0) == 0)
      topkMs += t;
  }
  const double cpMs = cp.at("score_decode") + topkMs;
  const int64_t T = g.numRows, W = all->scoreWidth;
  const double readPerRank = double(requests) * tokens * 72.0 / world;
  const double exchanged = double(world - 1) * T * heads * 128 + 2.0 * (world - 1) * heads * T * (W / world) * 4;
  std::cout << fmt::format(
      "decode CP {} x 4 x {} tokens, {} ranks x {} heads: rank share score_decode {:.3f} ms + top-k "
      "{:.3f} ms = {:.3f} ms vs local step {:.3f} ms (score {:.3f} + top-k {:.3f}): {:.2f}x, "
      "without the exchange; index-K read per rank {:.1f} MB (local {:.1f} MB); exchanged per rank "
      "{:.2f} MB (query all-gather in, scores all-to-all out and in)\n",
      requests, tokens, world, heads, cp.at("score_decode"), topkMs, cpMs, localMs,
      localMs - topkMs, topkMs, cpMs / localMs, readPerRank / 1e6, readPerRank * world / 1e6,
      exchanged / 1e6);
  return differing ? 1 : 0;
}

// An Indexer on CUDA device 0 for a batch's parameters, over kernels from `ptxDir`, warmed up.
StatusOr<std::unique_ptr<Indexer>> cudaIndexer(const std::string &ptxDir, const BatchView &v) {
  IndexerConfig config;
  config.numIndexHeads = v.params.numHeads;
  config.initBlocks = v.params.initBlocks;
  config.localBlocks = v.params.localBlocks;
  config.decodeQueryLens = {v.params.decodeQueryLen};
  auto backend = cuda::createCudaBackend(0, cuda::ptxFromDirectory(ptxDir));
  if (!backend.ok())
    return backend.status();
  auto indexer = createIndexer(config, Device{DeviceKind::Cuda, 0},
                               makeGpuIndexerEngine(config, std::move(backend).value()));
  if (indexer.ok())
    M3IDX_RETURN_IF_ERROR((*indexer)->warmup());
  return indexer;
}

// Each case through the Indexer API on device buffers, with block tables on the host only and
// also on the device, into the indexer's buffer, a caller's, and its own again: top-k checked
// against the reference (as the backend check: within the fp32 bound, and whether bit for bit),
// no kernel load and no scratch growth after the first step.
int checkIndexer(const std::string &ptxDir, const runtime::DeviceApi &api, int count, char **cases) {
  int failures = 0;
  for (int i = 0; i < count; ++i) {
    StatusOr<Case> c = loadCase(cases[i]);
    if (!c.ok()) {
      std::cout << cases[i] << ": Indexer FAILED: " << c.status().message() << "\n";
      ++failures;
      continue;
    }
    const BatchView v = c->view();
    const std::vector<int32_t> want = reference::runReference(v, false)->topk;
    for (bool deviceTables : {false, true}) {
      auto indexer = cudaIndexer(ptxDir, v);
      auto onDevice = indexer.ok() ? runtime::DeviceCase::upload(api, Device{DeviceKind::Cuda, 0}, v, deviceTables)
                                   : StatusOr<std::unique_ptr<runtime::DeviceCase>>(indexer.status());
      std::string problems;
      bool same = true; // bit for bit (exact-valued cases must be; others may swap near ties)
      int64_t allocations = -1;
      for (bool callerTopk : {false, true, false}) {
        if (!onDevice.ok()) {
          problems = " " + onDevice.status().message();
          break;
        }
        auto r = (*onDevice)->forward(**indexer, nullptr, callerTopk);
        auto got = r.ok() ? (*onDevice)->download(*r) : StatusOr<std::vector<int32_t>>(r.status());
        if (!got.ok()) {
          problems += " " + got.status().message();
          break;
        }
        if (!reference::checkTopk(v, *got).ok())
          problems += fmt::format(" top-k mismatch ({})", callerTopk ? "caller's buffer" : "own buffer");
        same = same && *got == want;
        if ((*indexer)->compilesAfterWarmup() != 0)
          problems += " kernel loaded after warm-up";
        if (allocations >= 0 && (*indexer)->scratchAllocations() != allocations)
          problems += " scratch grew in steady state";
        allocations = (*indexer)->scratchAllocations();
      }
      const char *tables = deviceTables ? "device block table" : "host block table";
      if (!problems.empty()) {
        std::cout << cases[i] << ": Indexer FAILED (" << tables << "):" << problems << "\n";
        ++failures;
      } else {
        std::cout << fmt::format("{}: Indexer OK ({}; H={} rows={}, own and caller's buffer; top-k {} "
                                 "the reference)\n",
                                 cases[i], tables, v.params.numHeads, v.numRows,
                                 same ? "equals" : "differs from");
      }
    }
  }
  std::cout << fmt::format("Indexer: {} of {} runs failed\n", failures, 2 * count);
  return failures ? 1 : 0;
}

// A decode step through Indexer::forward on device buffers against the backend's launches alone,
// in one run: with the block table uploaded from the host each step, and with it on the device.
// CUDA events around forward() on the null stream after an L2 flush, and the host time forward()
// takes to return; medians of 25 after 2 warm-ups. The flush (a 2 GiB memset, about 0.6 ms)
// outlasts forward()'s host time, so the GPU reaches the start event with the step queued whole
// and the events time the GPU's work, not the host's.
int benchIndexer(const std::string &ptxDir, runtime::GpuBackend &backend, const runtime::DeviceApi &api,
                 int requests, int64_t tokens, int heads) {
  StatusOr<Case> c = decodeStep(requests, tokens, heads);
  if (!c.ok()) {
    std::cerr << c.status().message() << "\n";
    return 1;
  }
  constexpr size_t kFlushBytes = size_t{2} << 30;
  uint64_t flush = 0;
  void *start = nullptr, *stop = nullptr;
  for (Status s : {api.check(api.alloc(&flush, kFlushBytes), "memory allocation"),
                   api.check(api.eventCreate(&start), "event creation"),
                   api.check(api.eventCreate(&stop), "event creation")})
    if (!s.ok()) {
      std::cerr << s.message() << "\n";
      return 1;
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double kernels = 0;
  for (auto &[name, t] : medianKernelMs(backend, c->view(), runtime::RunOptions{}, 25))
    kernels += t;
  std::string line = fmt::format("Indexer::forward decode {} x 4 x {} tokens, H={}: backend launches "
                                 "alone {:.3f} ms;",
                                 requests, tokens, heads, kernels);
  for (bool deviceTables : {false, true}) {
    auto indexer = cudaIndexer(ptxDir, c->view());
    auto onDevice = indexer.ok() ? runtime::DeviceCase::upload(api, Device{DeviceKind::Cuda, 0}, c->view(), deviceTables)
                                 : StatusOr<std::unique_ptr<runtime::DeviceCase>>(indexer.status());
    if (!onDevice.ok()) {
      std::cerr << onDevice.status().message() << "\n";
      return 1;
    }
    std::vector<double> gpuMs, hostUs;
    for (int i = 0; i < 27; ++i) {
      api.memsetAsync(flush, static_cast<uint8_t>(i), kFlushBytes, nullptr);
      api.eventRecord(start, nullptr);
      const auto t0 = std::chrono::steady_clock::now();
      auto r = (*onDevice)->forward(**indexer, nullptr, false);
      const auto t1 = std::chrono::steady_clock::now();
      api.eventRecord(stop, nullptr);
      api.eventSynchronize(stop);
      if (!r.ok()) {
        std::cerr << r.status().message() << "\n";
        return 1;
      }
      float ms = 0;
      api.eventElapsedMs(&ms, start, stop);
      if (i >= 2) {
        gpuMs.push_back(ms);
        hostUs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    }
    line += fmt::format(" {} table: {:.3f} ms on the stream ({:+.1f}%), forward() returns after {:.0f} us;",
                        deviceTables ? "device" : "host", median(gpuMs),
                        100.0 * (median(gpuMs) / kernels - 1), median(hostUs));
  }
  api.free(flush);
  std::cout << line << fmt::format(" block table {:.0f} KiB (events, medians of 25)\n",
                                   double(requests) * c->view().maxBlocks * 4 / 1024);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::cerr << "usage: m3idx-cuda-check PTX_DIR CASE...\n";
    return 2;
  }
  auto backend = cuda::createCudaBackend(0, cuda::ptxFromDirectory(argv[1]));
  if (!backend.ok()) {
    std::cerr << "m3idx-cuda-check: " << backend.status().message() << "\n";
    return 1;
  }
  std::cout << "device: " << (*backend)->deviceName() << "\n";
  const std::string mode = argv[2];
  if ((mode == "--bench" || mode == "--bench-prefill") && (argc == 6 || argc == 7)) {
    // The exact reference check of a whole step takes minutes on the CPU at these sizes: on request.
    const bool check = argc == 7 && std::string(argv[6]) == "--check";
    const bool prefill = mode == "--bench-prefill";
    GenOptions o;
    o.seed = 7;
    o.mode = ValueMode::Exact; // random bytes: fast to make at this size
    const int64_t tokens = std::atoll(argv[4]);
    o.numHeads = std::atoi(argv[5]);
    o.extraPages = 0;
    if (prefill) { // REQUESTS prompts of TOKENS tokens, all rows new: causal over the prompt
      o.numDecodes = 0;
      o.numPrefills = std::atoi(argv[3]);
      o.prefillQueryLen = {tokens, tokens};
      o.prefillContext = {tokens, tokens};
    } else {
      o.numDecodes = std::atoi(argv[3]);
      o.decodeContext = {tokens, tokens};
      o.numPrefills = 0;
    }
    StatusOr<Case> c = generateCase(o);
    if (!c.ok()) {
      std::cerr << c.status().message() << "\n";
      return 1;
    }
    const BatchView v = c->view();
    // Two warm-up steps, then 25 timed ones, each after an L2 flush; events time the launches
    // (METHOD.md: median of many runs, inputs from HBM).
    constexpr int kWarmup = 2, kTimed = 25;
    std::vector<double> ms;
    std::map<std::string, std::vector<double>> perKernel;
    for (int i = 0; i < kWarmup + kTimed; ++i) {
      runtime::RunOptions opts;
      opts.flushL2 = true;
      auto got = (*backend)->run(v, opts);
      if (!got.ok()) {
        std::cerr << got.status().message() << "\n";
        return 1;
      }
      if (i < kWarmup)
        continue;
      ms.push_back((*backend)->lastKernelMs());
      for (auto &[name, t] : (*backend)->lastKernelBreakdown())
        perKernel[name].push_back(t);
      if (i == kWarmup + kTimed - 1 && check) {
        reference::CheckReport r = reference::checkTopk(v, got->topk);
        std::cout << (r.ok() ? "top-k OK" : "top-k MISMATCH") << "\n";
        if (!r.ok())
          return 1;
      }
    }
    for (auto &[name, t] : perKernel) {
      std::sort(t.begin(), t.end());
      std::cout << fmt::format("  {}: {:.3f} ms (median of {}, in sequence)\n", name,
                               t[t.size() / 2], t.size());
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    if (prefill) {
      // Work: every row dots the tokens it sees (causal: row r of a prompt sees r + 1) with H heads.
      const double n = double(tokens), macs = o.numPrefills * o.numHeads * 128.0 * n * (n + 1) / 2;
      std::cout << fmt::format("prefill {} x {} tokens, H={}: {:.3f} ms (median of {}, CUDA events), "
                               "{:.1f} TFLOP/s of q.k products ({:.2f} TFLOP)\n",
                               o.numPrefills, tokens, o.numHeads, median, ms.size(),
                               2 * macs / (median * 1e9), 2 * macs / 1e12);
      return 0;
    }
    const double bytes = double(o.numDecodes) * o.decodeContext.min * 72.0;
    // The copy moves the step's index-K bytes (at least 256 MiB), read and written once.
    auto copy = (*backend)->copyBandwidthGBs(std::max<size_t>(size_t(bytes), size_t{256} << 20), 20);
    const double gbs = bytes / (median * 1e6);
    std::cout << fmt::format("decode {} x 4 x {} tokens, H={}: {:.3f} ms (median of {}, CUDA events), "
                             "{:.1f} GB/s of index-K; copy {:.0f} GB/s; {:.1f}% of copy\n",
                             o.numDecodes, o.decodeContext.min, o.numHeads, median, ms.size(), gbs,
                             copy.ok() ? *copy : 0.0, copy.ok() ? 100.0 * gbs / *copy : 0.0);
    return 0;
  }
  if (mode == "--indexer" && argc > 3) {
    auto api = cuda::loadDriver();
    return api.ok() ? checkIndexer(argv[1], **api, argc - 3, argv + 3) : 1;
  }
  if (mode == "--indexer-bench" && argc == 6) {
    auto api = cuda::loadDriver();
    return api.ok() ? benchIndexer(argv[1], **backend, **api, std::atoi(argv[3]), std::atoll(argv[4]),
                                   std::atoi(argv[5]))
                    : 1;
  }
  if (mode == "--bench-cp" && argc == 7)
    return benchDecodeCp(**backend, std::atoi(argv[3]), std::atoll(argv[4]), std::atoi(argv[5]),
                         std::atoi(argv[6]));
  int failures = 0;
  for (int i = 2; i < argc; ++i) {
    StatusOr<Case> c = loadCase(argv[i]);
    if (!c.ok()) {
      std::cout << argv[i] << ": " << c.status().message() << "\n";
      ++failures;
      continue;
    }
    const BatchView v = c->view();
    StatusOr<IndexerOutput> got = (*backend)->run(v, runtime::RunOptions{true});
    if (!got.ok()) {
      std::cout << argv[i] << ": FAILED: " << got.status().message() << "\n";
      ++failures;
      continue;
    }
    const double kernelMs = (*backend)->lastKernelMs();
    StatusOr<IndexerOutput> want = reference::runReference(v, true);
    reference::CheckReport report = reference::checkTopk(v, got->topk);
    reference::checkScores(v, got->scores, got->scoreWidth, report);
    // Exact-valued cases: scores equal the reference by value and top-k bit for bit.
    int64_t scoreDiffs = 0;
    for (size_t s = 0; s < got->scores.size(); ++s) {
      const float a = got->scores[s], b = want->scores[s];
      scoreDiffs += !(a == b || (std::isnan(a) && std::isnan(b)));
    }
    const bool sameTopk = got->topk == want->topk;
    std::cout << fmt::format("{}: {} (H={} rows={} W={}; {} near-tie swaps; top-k {} the "
                             "reference, {} scores differ from it; kernels {:.2f} ms)\n",
                             argv[i], report.ok() ? "OK" : "MISMATCH", v.params.numHeads,
                             v.numRows, got->scoreWidth, report.nearTieSwaps,
                             sameTopk ? "equals" : "differs from", scoreDiffs, kernelMs);
    for (const std::string &p : report.problems)
      std::cout << "  " << p << "\n";
    failures += !report.ok();
  }
  std::cout << fmt::format("{} passed, {} failed\n", argc - 2 - failures, failures);
  return failures ? 1 : 0;
}
