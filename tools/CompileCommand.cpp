// `m3idx compile`: AOT-compile every kernel config for the given targets into a bundle.
#include <chrono>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "runtime/AotBundle.h"
#include "tools/Commands.h"

namespace m3idx::cli {

namespace {

struct CompileArgs {
  std::string targets = "host", heads = "1,2,4", queryLens = "4", out;
  int jobs = 2;
};

template <typename T> bool parseList(const std::string &text, std::vector<T> &out) {
  std::stringstream in(text);
  std::string item;
  out.clear();
  while (std::getline(in, item, ',')) {
    if (item.empty())
      return false;
    if constexpr (std::is_same_v<T, int>) {
      size_t used = 0;
      try {
        out.push_back(std::stoi(item, &used));
      } catch (...) {
        return false;
      }
      if (used != item.size())
        return false;
    } else {
      out.push_back(item);
    }
  }
  return !out.empty();
}

int runCompile(const CompileArgs &a) {
  runtime::BundleRequest req;
  req.out = a.out;
  req.jobs = a.jobs;
  if (!parseList(a.targets, req.targets))
    return fail(fmt::format("--target: expected a comma-separated list, got '{}'", a.targets));
  if (!parseList(a.heads, req.heads))
    return fail(fmt::format("--heads: expected a comma-separated list of 1, 2, 4, got '{}'", a.heads));
  for (int h : req.heads)
    if (h != 1 && h != 2 && h != 4)
      return fail(fmt::format("--heads: expected 1, 2 or 4, got {}", h));
  if (!parseList(a.queryLens, req.decodeQueryLens))
    return fail(fmt::format("--query-lens: expected a comma-separated list, got '{}'", a.queryLens));
  const bool tty = ::isatty(STDOUT_FILENO);
  auto t0 = std::chrono::steady_clock::now();
  auto items = runtime::compileBundle(req, [&](const runtime::BundleItem &it, size_t done,
                                               size_t total) {
    std::string line = fmt::format("[{}/{}] {} {} ({}): {}", done, total, it.target, it.kernel,
                                   it.config,
                                   it.error.empty() ? fmt::format("{:.0f} ms, {} B", it.compileMs,
                                                                  it.bytes)
                                                    : "FAILED: " + it.error);
    if (tty)
      std::cout << "\r\033[K" << line << (done == total ? "\n" : "") << std::flush;
    else
      std::cout << line << "\n";
  });
  if (!items.ok())
    return fail(items.status().message());
  size_t failed = 0;
  double compileMs = 0;
  for (const runtime::BundleItem &it : *items) {
    failed += !it.error.empty();
    compileMs += it.compileMs;
  }
  const double wallMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("{}: {} kernels compiled, {} failed; {:.0f} ms of compiles in {:.0f} ms "
                           "with {} jobs; manifest {}/manifest.json\n",
                           a.out, items->size() - failed, failed, compileMs, wallMs, a.jobs, a.out);
  return failed ? 1 : 0;
}

} // namespace

void addCompileCommand(CLI::App &app, Runner &run) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App *cmd = app.add_subcommand("compile", "AOT-compile every kernel config into a bundle");
  cmd->add_option("--target", args->targets, "Comma-separated targets (host, sm_90, gfx950)")->capture_default_str();
  cmd->add_option("--heads", args->heads, "Comma-separated num_index_heads")->capture_default_str();
  cmd->add_option("--query-lens", args->queryLens, "Comma-separated decode_query_len values")
      ->capture_default_str();
  cmd->add_option("--jobs", args->jobs, "Parallel compiles")->capture_default_str();
  cmd->add_option("--out", args->out, "Bundle folder (use it with M3IDX_AOT_PATH)")->required();
  cmd->callback([&run, args] { run = [args] { return runCompile(*args); }; });
}

} // namespace m3idx::cli
