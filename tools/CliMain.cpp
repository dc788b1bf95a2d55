// The m3idx CLI's entry point, inside libm3idx.so (so the CLI and the library share one copy of
// the compiler); bin/m3idx only calls m3idx_cli_main.
#include <iostream>

#include "tools/Commands.h"

namespace m3idx::cli {
int fail(const std::string &message) {
  std::cerr << "m3idx: error: " << message << "\n";
  return 1;
}
} // namespace m3idx::cli

extern "C" __attribute__((visibility("default"))) int m3idx_cli_main(int argc, char **argv) {
  CLI::App app{"m3idx: JIT kernels for the MiniMax-M3 lightning indexer over NVFP4 index-K pages"};
  app.require_subcommand(1);
  m3idx::cli::Runner run;
  m3idx::cli::addGenCommand(app, run);
  m3idx::cli::addRunCommand(app, run);
  m3idx::cli::addCheckCommand(app, run);
  m3idx::cli::addInspectCommand(app, run);
  m3idx::cli::addBenchCommand(app, run);
  m3idx::cli::addCacheCommand(app, run);
  m3idx::cli::addCacheBenchCommand(app, run);
  m3idx::cli::addCompileCommand(app, run);
  m3idx::cli::addEnvCommand(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  try {
    return run ? run() : 2;
  } catch (const std::exception &e) { // a bug, not bad input: still one line, no core dump
    return m3idx::cli::fail(std::string("internal error: ") + e.what());
  }
}
