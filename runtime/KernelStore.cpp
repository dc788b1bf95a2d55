#include "runtime/KernelStore.h"

#include "runtime/CacheOrCompile.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cache/CacheKey.h"
#include "core/AtomicFile.h"
#include "core/EnvTable.h"
#include "lowering/Target.h"

namespace m3idx::runtime {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

const std::string &hostTargetFingerprint() {
  static const std::string fp = lowering::makeHostTarget()->fingerprint();
  return fp;
}

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep))
    if (!item.empty())
      out.push_back(item);
  return out;
}

StatusOr<std::unique_ptr<lowering::HostKernel>> loadEntry(const cache::Entry &e) {
  return lowering::loadHostKernel(lowering::HostObject{e.symbol, e.binary});
}

// M3IDX_DUMP: the stages of every kernel this process uses, whether compiled or read.
void dumpStages(const dsl::Kernel &k, const kernels::KernelConfig &config, const std::string &key,
                const std::vector<uint8_t> &object) {
  const std::vector<std::string> stages = split(env::get("M3IDX_DUMP"), ',');
  if (stages.empty())
    return;
  const fs::path dir = env::get("M3IDX_DUMP_DIR");
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string stem =
      (dir / fmt::format("{}.{}.{}", k.name, config.str(), key.substr(0, 12))).string();
  for (const std::string &stage : stages) {
    static const std::map<std::string, lowering::Stage> named = {
        {"dsl", lowering::Stage::Dsl}, {"mlir", lowering::Stage::Mlir},
        {"llvm", lowering::Stage::Llvm}, {"asm", lowering::Stage::Asm}};
    Status s;
    if (stage == "bin") {
      s = writeFileAtomically(stem + ".o", std::string(object.begin(), object.end()));
    } else if (auto it = named.find(stage); it != named.end()) {
      StatusOr<std::string> text = lowering::hostStage(k, it->second);
      s = text.ok() ? writeFileAtomically(stem + "." + stage, *text) : text.status();
    } else {
      s = invalidArgument("M3IDX_DUMP", "stages among dsl, mlir, llvm, asm, bin", "'" + stage + "'");
    }
    if (!s.ok())
      std::cerr << "m3idx: warning: dump failed: " << s.message() << "\n";
  }
}

} // namespace

const char *sourceName(KernelSource s) {
  switch (s) {
  case KernelSource::Compiled: return "compiled";
  case KernelSource::DiskCache: return "disk cache";
  case KernelSource::AotBundle: return "AOT bundle";
  }
  return "?";
}

cache::KeyInputs hostKeyInputs(const dsl::Kernel &k, const kernels::KernelConfig &config) {
  cache::KeyInputs in;
  in.toolchain = lowering::hostToolchainFingerprint();
  in.kernel = k.name;
  in.dsl = k.print();
  in.config = config.str();
  in.target = hostTargetFingerprint();
  in.options = "opt-level=" + env::get("M3IDX_OPT_LEVEL");
  in.environment = env::codeChangingFingerprint();
  return in;
}

KernelStore::KernelStore() : disk_(cache::defaultCacheDirectory()) {}

StatusOr<StoredKernel> KernelStore::get(kernels::KernelKind kind, const kernels::KernelConfig &config) {
  std::lock_guard<std::mutex> lock(mutex_);
  const MemoryKey mk{static_cast<int>(kind), config};
  auto it = memory_.find(mk);
  if (it == memory_.end()) {
    KernelRecord record;
    kernels::KernelSignature signature;
    auto kernel = obtain(kind, config, record, signature);
    if (!kernel.ok())
      return kernel.status();
    records_.push_back(record);
    it = memory_.emplace(mk, Stored{std::move(kernel).value(), std::move(signature)}).first;
  }
  return StoredKernel{it->second.code.get(), &it->second.signature};
}

StatusOr<std::unique_ptr<lowering::HostKernel>>
KernelStore::obtain(kernels::KernelKind kind, const kernels::KernelConfig &config,
                    KernelRecord &record, kernels::KernelSignature &signature) {
  StatusOr<dsl::Kernel> k = kernels::buildKernel(kind, config);
  if (!k.ok())
    return k.status();
  signature = kernels::signatureOf(*k);
  const std::string key = cache::cacheKey(hostKeyInputs(*k, config));
  record.kernel = k->name;
  record.config = config.str();
  record.key = key;
  const bool readCaches = !env::flag("M3IDX_ALWAYS_COMPILE");

  auto useEntry = [&](const cache::Entry &e, KernelSource source,
                      Clock::time_point t0) -> StatusOr<std::unique_ptr<lowering::HostKernel>> {
    auto loaded = loadEntry(e);
    if (!loaded.ok())
      return loaded.status();
    record.source = source;
    record.loadMs = msSince(t0);
    dumpStages(*k, config, key, e.binary);
    return loaded;
  };

  std::string unusable;
  if (readCaches) {
    auto t0 = Clock::now();
    StatusOr<std::optional<cache::Entry>> e = cache::findInBundles("llvmcache-" + key, key, unusable);
    if (!e.ok())
      return e.status();
    if (*e)
      return useEntry(**e, KernelSource::AotBundle, t0);
  }
  auto t0 = Clock::now();
  StatusOr<CachedEntry> found = cacheOrCompile(
      disk_, key, fmt::format("kernel {} ({}) for target host", k->name, config.str()),
      fmt::format("memory, any AOT bundle or the cache {}", disk_.dir()),
      [&]() -> StatusOr<cache::Entry> {
        auto object = lowering::compileHostObject(*k, &record.compile);
        if (!object.ok())
          return object.status();
        cache::Entry entry;
        entry.producer = lowering::hostToolchainFingerprint();
        entry.target = "host";
        entry.kernel = k->name;
        entry.config = config.str();
        entry.key = key;
        entry.symbol = object->symbol;
        entry.binary = object->bytes;
        entry.metadata = nlohmann::json{{"compile_ms", record.compile.totalMs()},
                                        {"emit_ms", record.compile.emitMs},
                                        {"pipeline_ms", record.compile.pipelineMs},
                                        {"llvm_ms", record.compile.jitMs},
                                        {"object_bytes", object->bytes.size()},
                                        {"target", hostTargetFingerprint()},
                                        {"created_unix", static_cast<int64_t>(std::time(nullptr))}}
                             .dump();
        return entry;
      },
      unusable);
  if (!found.ok())
    return found.status();
  if (found->compiled)
    t0 = Clock::now(); // load time excludes the compile, which record.compile holds
  return useEntry(found->entry, found->compiled ? KernelSource::Compiled : KernelSource::DiskCache, t0);
}

} // namespace m3idx::runtime
