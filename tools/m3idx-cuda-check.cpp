// m3idx-cuda-check: runs case folders on the CUDA backend with PTX made elsewhere (no LLVM here, so
// it builds on a GPU machine with only the driver) and checks every output against the scalar
// reference: exact-valued cases bit for bit (scores by value), others within the fp32 summation
// bound up to near-tie swaps. Usage: m3idx-cuda-check PTX_DIR CASE... ; exit 1 on any mismatch.
// `m3idx-cuda-check PTX_DIR --bench|--bench-prefill REQUESTS TOKENS HEADS [--check]` generates a
// decode step (or REQUESTS prompts of TOKENS tokens) of that
// size on the spot, times it (median of 10 after a warm-up), with --check checks it against the
// reference (minutes on the CPU at 256 x 128K), and prints the ratio to the device's copy bandwidth
// measured in the same run.
#include <cmath>
#include <iostream>
#include <map>

#include <algorithm>

#include "casefile/CaseFile.h"
#include "casefile/CaseGenerator.h"
#include "reference/ReferenceIndexer.h"
#include "reference/TopkCheck.h"
#include "runtime/cuda/CudaBackend.h"

using namespace m3idx;

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
    std::vector<double> ms;
    std::map<std::string, std::vector<double>> perKernel;
    for (int i = 0; i <= 20; ++i) {
      runtime::RunOptions opts;
      opts.timeEachKernel = i > 10; // runs 11..20 give the per-kernel breakdown
      auto got = (*backend)->run(v, opts);
      if (!got.ok()) {
        std::cerr << got.status().message() << "\n";
        return 1;
      }
      if (i >= 1 && i <= 10)
        ms.push_back((*backend)->lastKernelMs());
      for (auto &[name, t] : (*backend)->lastKernelBreakdown())
        perKernel[name].push_back(t);
      if (i == 20 && check) {
        reference::CheckReport r = reference::checkTopk(v, got->topk);
        std::cout << (r.ok() ? "top-k OK" : "top-k MISMATCH") << "\n";
        if (!r.ok())
          return 1;
      }
    }
    for (auto &[name, t] : perKernel) {
      std::sort(t.begin(), t.end());
      std::cout << fmt::format("  {}: {:.3f} ms (median of {}, synchronized alone)\n", name,
                               t[t.size() / 2], t.size());
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    if (prefill) {
      // Work: every row dots the tokens it sees (causal: row r of a prompt sees r + 1) with H heads.
      const double n = double(tokens), macs = o.numPrefills * o.numHeads * 128.0 * n * (n + 1) / 2;
      std::cout << fmt::format("prefill {} x {} tokens, H={}: {:.3f} ms (median of 10, launches + "
                               "sync), {:.1f} TFLOP/s of q.k products ({:.2f} TFLOP)\n",
                               o.numPrefills, tokens, o.numHeads, median,
                               2 * macs / (median * 1e9), 2 * macs / 1e12);
      return 0;
    }
    const double bytes = double(o.numDecodes) * o.decodeContext.min * 72.0;
    auto copy = (*backend)->copyBandwidthGBs(size_t{1} << 30, 10);
    const double gbs = bytes / (median * 1e6);
    std::cout << fmt::format("decode {} x 4 x {} tokens, H={}: {:.3f} ms (median of 10, launches + "
                             "sync), {:.1f} GB/s of index-K; copy {:.0f} GB/s; {:.1f}% of copy\n",
                             o.numDecodes, o.decodeContext.min, o.numHeads, median, gbs,
                             copy.ok() ? *copy : 0.0, copy.ok() ? 100.0 * gbs / *copy : 0.0);
    return 0;
  }
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
