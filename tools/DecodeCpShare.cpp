// m3idx bench --cp-share: one decode-CP rank's share of a step on one GPU (tools/GpuSteps.h). The
// rank scores every world-th block for all world x H heads of its group (after the query
// all-gather), then, its heads' rows complete after the all-to-all, selects the top-k as a local
// step does; the exchange itself is not timed here (it needs the ranks' GPUs).
#include <cmath>
#include <cstring>
#include <iostream>

#include "bench/support/DeviceTiming.h"
#include "tools/GpuSteps.h"

namespace m3idx::cli {

Status benchDecodeCpShare(runtime::GpuBackend &gpu, const BatchView &g, const BatchView &local, int world,
                          int repeat) {
  runtime::RunOptions full;
  full.keepScores = true;
  StatusOr<IndexerOutput> all = gpu.run(g, full);
  if (!all.ok())
    return all.status();
  const int64_t T = all->numRows, W = all->scoreWidth;
  int64_t compared = 0, differing = 0;
  for (int r = 0; r < world; ++r) {
    runtime::RunOptions share = full;
    share.decodeBlockBegin = r;
    share.decodeBlockStep = world;
    StatusOr<IndexerOutput> got = gpu.run(g, share);
    if (!got.ok())
      return got.status();
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
  std::cout << fmt::format("CP shares of {} ranks: {} scores compared with the full scoring, {} differ\n", world,
                           compared, differing);
  if (differing)
    return Status::error(fmt::format("--cp-share: {} of {} share scores differ from the full scoring", differing,
                                     compared));
  runtime::RunOptions share;
  share.decodeBlockStep = world;
  StatusOr<std::map<std::string, double>> cp = bench::medianKernelMs(gpu, g, share, repeat);
  StatusOr<std::map<std::string, double>> own = bench::medianKernelMs(gpu, local, runtime::RunOptions{}, repeat);
  if (!cp.ok() || !own.ok())
    return cp.ok() ? own.status() : cp.status();
  double localMs = 0, topkMs = 0;
  for (auto &[name, t] : *own) {
    localMs += t;
    if (name.rfind("topk", 0) == 0)
      topkMs += t;
  }
  auto score = cp->find("score_decode");
  if (score == cp->end())
    return Status::error("--cp-share: the share ran no score_decode kernel");
  const double scoreMs = score->second, cpMs = scoreMs + topkMs;
  int64_t tokens = 0;
  for (int64_t i = 0; i < g.numRequests; ++i)
    tokens += g.seqLens[i];
  const int64_t H = local.params.numHeads;
  const double readPerRank = double(tokens) * 72.0 / world;
  const double exchanged = double(world - 1) * T * H * 128 + 2.0 * (world - 1) * H * T * (W / world) * 4;
  std::cout << fmt::format(
      "decode CP {} requests, {} ranks x {} heads: rank share score_decode {:.3f} ms + top-k {:.3f} ms = "
      "{:.3f} ms vs local step {:.3f} ms (score {:.3f} + top-k {:.3f}): {:.2f}x, without the exchange; "
      "index-K read per rank {:.1f} MB (local {:.1f} MB); exchanged per rank {:.2f} MB (query all-gather in, "
      "scores all-to-all out and in); medians of {}\n",
      g.numRequests, world, H, scoreMs, topkMs, cpMs, localMs, localMs - topkMs, topkMs, cpMs / localMs,
      readPerRank / 1e6, readPerRank * world / 1e6, exchanged / 1e6, repeat);
  return Status();
}

} // namespace m3idx::cli
