// The one interface every backend implements (reference, host JIT, later HIP and CUDA): run one
// validated indexer step and return top-k (and scores on request).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/Batch.h"
#include "core/IndexerOutput.h"
#include "core/Status.h"

namespace m3idx::runtime {

struct RunOptions {
  bool keepScores = false; // fill IndexerOutput::scores ([H, T, W], NaN where b >= nblk)
  void *stream = nullptr;  // GPU backends: the caller's CUstream / hipStream_t (null: default)
  // GPU backends: called with the stream after the step's uploads, just before its first timing
  // event (benchmarks flush L2 there: bench/support/DeviceTiming.h).
  std::function<Status(void *stream)> beforeLaunches = nullptr;
  // GPU backends: score only decode blocks decodeBlockBegin, + decodeBlockStep, ... (one decode-CP
  // rank's share, SPEC §6). With a step above 1 only the score kernels run: other blocks' scores are
  // left unwritten and there is no top-k (the CP exchange would complete the rows first).
  int64_t decodeBlockBegin = 0, decodeBlockStep = 1;
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual StatusOr<IndexerOutput> run(const BatchView &batch, const RunOptions &options) = 0;
};

// "ref" or "host"; the error lists the backends there are.
StatusOr<std::unique_ptr<Backend>> makeBackend(const std::string &name);
std::vector<std::string> backendNames();

} // namespace m3idx::runtime
