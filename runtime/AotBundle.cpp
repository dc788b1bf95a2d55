#include "runtime/AotBundle.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cache/CacheKey.h"
#include "cache/EntryFile.h"
#include "core/AtomicFile.h"
#include "kernels_src/KernelCatalog.h"
#include "lowering/Target.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/GpuCodeCache.h"
#include "runtime/KernelStore.h"
#include "tuning/TargetRegistry.h"

namespace m3idx::runtime {

namespace fs = std::filesystem;
using kernels::KernelKind;

namespace {

// One kernel config for one target into the bundle folder: host objects as llvmcache-KEY, GPU
// code objects in their portable form (PTX, HSACO) as gpucache-KEY.
void compileItem(const std::string &out, const std::string &target, KernelKind kind,
                 const kernels::KernelConfig &config, BundleItem &item) {
  item.target = target;
  StatusOr<dsl::Kernel> k = kernels::buildKernel(kind, config);
  if (!k.ok()) {
    item.error = k.status().message();
    return;
  }
  item.kernel = k->name;
  item.config = config.str();
  StatusOr<cache::Entry> entry = Status::error("unreachable");
  const tuning::TargetInfo &info = **tuning::targetNamed(target); // compileBundle checked the name
  if (!info.gpu()) {
    item.key = cache::cacheKey(hostKeyInputs(*k, config));
    item.file = "llvmcache-" + item.key;
    lowering::HostCompileStats stats;
    auto object = lowering::compileHostObject(*k, &stats);
    item.compileMs = stats.totalMs();
    if (!object.ok())
      entry = object.status();
    else
      entry = cache::Entry{lowering::hostToolchainFingerprint(), "host", item.kernel, item.config,
                           item.key, object->symbol,
                           nlohmann::json{{"compile_ms", stats.totalMs()}, {"aot", true}}.dump(),
                           object->bytes};
  } else {
    StatusOr<std::unique_ptr<lowering::Target>> made = lowering::makeTarget(target);
    if (!made.ok()) {
      item.error = made.status().message();
      return;
    }
    std::unique_ptr<lowering::Target> t = std::move(*made);
    item.key = gpuCodeKey(*k, config, *t, std::nullopt);
    item.file = "gpucache-" + item.key;
    auto t0 = std::chrono::steady_clock::now();
    entry = compileGpuEntry(*k, config, *t, std::nullopt, item.key);
    item.compileMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  if (!entry.ok()) {
    item.error = entry.status().message();
    return;
  }
  item.bytes = entry->binary.size();
  Status s = writeFileAtomically((fs::path(out) / item.file).string(), cache::encodeEntry(*entry));
  if (!s.ok())
    item.error = s.message();
}

} // namespace

StatusOr<std::vector<BundleItem>> compileBundle(const BundleRequest &req,
                                                const BundleProgress &progress) {
  for (const std::string &t : req.targets)
    if (!tuning::targetNamed(t).ok())
      return invalidArgument("--target", tuning::targetNameList(), "'" + t + "'");
  if (req.jobs < 1)
    return invalidArgument("--jobs", ">= 1", req.jobs);
  // Every kernel config the requested heads and decode query lengths need, once per target.
  struct Work {
    std::string target;
    KernelKind kind;
    kernels::KernelConfig config;
  };
  std::set<std::tuple<std::string, int, std::string>> seen;
  std::vector<Work> work;
  for (const std::string &t : req.targets) {
    StatusOr<const tuning::TargetTuning *> tuning = tuning::tuningFor(t);
    if (!tuning.ok())
      return tuning.status();
    for (int h : req.heads)
      for (int q : req.decodeQueryLens)
        for (KernelKind k : kernels::allKernels())
          for (const kernels::KernelConfig &c : (*tuning)->configsFor(k, h, q))
            if (seen.insert({t, static_cast<int>(k), c.str()}).second)
              work.push_back({t, k, c});
  }
  std::error_code ec;
  fs::create_directories(req.out, ec);
  if (ec)
    return invalidArgument("--out", "a folder that can be created", ec.message());

  std::vector<BundleItem> items(work.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex progressMutex;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < work.size();) {
      compileItem(req.out, work[i].target, work[i].kind, work[i].config, items[i]);
      std::lock_guard<std::mutex> lock(progressMutex);
      if (progress)
        progress(items[i], ++done, work.size());
    }
  };
  std::vector<std::thread> pool;
  for (int j = 1; j < std::min<int>(req.jobs, static_cast<int>(work.size())); ++j)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();

  nlohmann::ordered_json manifest;
  manifest["schema_version"] = 1;
  manifest["format_version"] = cache::kFormatVersion;
  manifest["producer"] = lowering::hostToolchainFingerprint();
  manifest["entries"] = nlohmann::json::array();
  for (const BundleItem &it : items)
    if (it.error.empty())
      manifest["entries"].push_back({{"target", it.target}, {"kernel", it.kernel},
                                     {"config", it.config}, {"key", it.key}, {"file", it.file},
                                     {"bytes", it.bytes}, {"compile_ms", it.compileMs}});
  M3IDX_RETURN_IF_ERROR(
      writeFileAtomically((fs::path(req.out) / "manifest.json").string(), manifest.dump(2) + "\n"));
  return items;
}

} // namespace m3idx::runtime
