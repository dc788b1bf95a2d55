// AOT bundles (`m3idx compile --target host,sm_90,gfx950 --out BUNDLE`): a folder of cache entries
// for every kernel config and target asked for, plus manifest.json. Put on M3IDX_AOT_PATH, a bundle
// serves kernels with no compiler (GPU code in its portable form: PTX for the driver, HSACO).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/Status.h"

namespace m3idx::runtime {

struct BundleRequest {
  std::string out;
  std::vector<std::string> targets = {"host"};
  std::vector<int> heads = {1, 2, 4};
  std::vector<int> decodeQueryLens = {4};
  int jobs = 2;
};

struct BundleItem {
  std::string target, kernel, config, key, file;
  double compileMs = 0;
  uint64_t bytes = 0;
  std::string error; // empty when compiled
};

// Called as each kernel finishes (from worker threads, serialized).
using BundleProgress = std::function<void(const BundleItem &item, size_t done, size_t total)>;

StatusOr<std::vector<BundleItem>> compileBundle(const BundleRequest &request,
                                                const BundleProgress &progress);

} // namespace m3idx::runtime
