#include "runtime/AotBundle.h"

#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "cache/CacheKey.h"
#include "cache/EntryFile.h"
#include "core/AtomicFile.h"
#include "kernels_src/KernelCatalog.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/KernelStore.h"

namespace m3idx::runtime {

namespace fs = std::filesystem;
using kernels::KernelKind;

StatusOr<std::vector<BundleItem>> compileBundle(const BundleRequest &req,
                                                const BundleProgress &progress) {
  for (const std::string &t : req.targets)
    if (t != "host")
      return invalidArgument("--target",
                             "host (sm_90 kernels are not cached or bundled yet; gfx950 is not built)",
                             "'" + t + "'");
  if (req.jobs < 1)
    return invalidArgument("--jobs", ">= 1", req.jobs);
  // Every kernel config the requested heads and decode query lengths need, once each.
  std::set<std::pair<int, std::string>> seen;
  std::vector<std::pair<KernelKind, kernels::KernelConfig>> work;
  for (int h : req.heads)
    for (int q : req.decodeQueryLens)
      for (KernelKind k : kernels::allKernels()) {
        kernels::KernelConfig c = kernels::configFor(k, h, q);
        if (seen.insert({static_cast<int>(k), c.str()}).second)
          work.push_back({k, c});
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
      BundleItem &item = items[i];
      item.target = "host";
      StatusOr<dsl::Kernel> k = kernels::buildKernel(work[i].first, work[i].second);
      if (!k.ok()) {
        item.error = k.status().message();
      } else {
        item.kernel = k->name;
        item.config = work[i].second.str();
        item.key = cache::cacheKey(hostKeyInputs(*k, work[i].second));
        lowering::HostCompileStats stats;
        auto object = lowering::compileHostObject(*k, &stats);
        if (!object.ok()) {
          item.error = object.status().message();
        } else {
          cache::Entry e{lowering::hostToolchainFingerprint(), "host", item.kernel, item.config,
                         item.key, object->symbol,
                         nlohmann::json{{"compile_ms", stats.totalMs()}, {"aot", true}}.dump(),
                         object->bytes};
          item.file = "llvmcache-" + item.key;
          item.compileMs = stats.totalMs();
          item.bytes = object->bytes.size();
          Status s = writeFileAtomically((fs::path(req.out) / item.file).string(),
                                         cache::encodeEntry(e));
          if (!s.ok())
            item.error = s.message();
        }
      }
      std::lock_guard<std::mutex> lock(progressMutex);
      if (progress)
        progress(item, ++done, work.size());
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
