// `m3idx cache ls|stats|verify|prune|clear [--json]`: the on-disk kernel cache.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cache/DiskCache.h"
#include "core/EnvTable.h"
#include "tools/Commands.h"

namespace m3idx::cli {

namespace {

struct CacheArgs {
  std::string action;
  bool json = false;
  std::string dir;
};

nlohmann::ordered_json listingJson(const cache::DiskCache::Listing &l) {
  nlohmann::ordered_json j;
  j["file"] = l.path;
  j["bytes"] = l.bytes;
  j["modified_unix"] = l.modifiedUnix;
  j["ok"] = l.problem.empty();
  if (l.entry) {
    j["kernel"] = l.entry->kernel;
    j["config"] = l.entry->config;
    j["target"] = l.entry->target;
    j["key"] = l.entry->key;
    j["producer"] = l.entry->producer;
    j["metadata"] = nlohmann::json::parse(l.entry->metadata, nullptr, false);
  }
  if (!l.problem.empty())
    j["problem"] = l.problem;
  return j;
}

int runCache(const CacheArgs &a) {
  cache::DiskCache disk(a.dir.empty() ? cache::defaultCacheDirectory() : a.dir);
  nlohmann::ordered_json out;
  out["schema_version"] = 1;
  out["dir"] = disk.dir();
  if (a.action == "clear") {
    Status s = disk.clear();
    if (!s.ok())
      return fail(s.message());
    if (a.json)
      std::cout << out.dump(2) << "\n";
    else
      std::cout << "cleared " << disk.dir() << "\n";
    return 0;
  }
  if (a.action == "prune") {
    Status s = disk.prune(env::get("M3IDX_CACHE_POLICY"), /*force=*/true);
    if (!s.ok())
      return fail(s.message());
  }
  std::vector<cache::DiskCache::Listing> entries = disk.list();
  uint64_t bytes = 0;
  size_t bad = 0;
  for (const auto &l : entries) {
    bytes += l.bytes;
    bad += !l.problem.empty();
  }
  if (a.action == "ls") {
    if (a.json) {
      out["entries"] = nlohmann::json::array();
      for (const auto &l : entries)
        out["entries"].push_back(listingJson(l));
      std::cout << out.dump(2) << "\n";
    } else {
      for (const auto &l : entries)
        std::cout << fmt::format("{:<14} {:<16} {:<6} {:>8} B  {}{}\n",
                                 l.entry ? l.entry->kernel : "?", l.entry ? l.entry->config : "?",
                                 l.entry ? l.entry->target : "?", l.bytes, l.path,
                                 l.problem.empty() ? "" : "  (" + l.problem + ")");
    }
    return 0;
  }
  // stats, verify, prune: a summary; verify fails when an entry is unusable.
  out["entries"] = entries.size();
  out["bytes"] = bytes;
  out["unusable"] = bad;
  out["policy"] = env::get("M3IDX_CACHE_POLICY");
  if (a.action == "verify" && !disk.trust().ok()) // what m3idx would refuse to run from
    return fail(disk.trust().message());
  if (a.action == "verify") {
    out["problems"] = nlohmann::json::array();
    for (const auto &l : entries)
      if (!l.problem.empty())
        out["problems"].push_back({{"file", l.path}, {"problem", l.problem}});
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << fmt::format("{}: {} entries, {} bytes, {} unusable (policy {})\n", disk.dir(),
                             entries.size(), bytes, bad, env::get("M3IDX_CACHE_POLICY"));
    if (a.action == "verify")
      for (const auto &l : entries)
        if (!l.problem.empty())
          std::cout << "  " << l.path << ": " << l.problem << "\n";
  }
  return a.action == "verify" && bad ? 1 : 0;
}

} // namespace

void addCacheCommand(CLI::App &app, Runner &run) {
  auto args = std::make_shared<CacheArgs>();
  CLI::App *cmd = app.add_subcommand("cache", "Inspect and manage the on-disk kernel cache");
  cmd->add_option("ACTION", args->action, "ls, stats, verify, prune or clear")
      ->required()
      ->check(CLI::IsMember({"ls", "stats", "verify", "prune", "clear"}));
  cmd->add_flag("--json", args->json, "JSON output (with schema_version)");
  cmd->add_option("--dir", args->dir, "Cache folder (default: M3IDX_CACHE_DIR or ~/.cache/m3idx, /v1)");
  cmd->callback([&run, args] { run = [args] { return runCache(*args); }; });
}

} // namespace m3idx::cli
