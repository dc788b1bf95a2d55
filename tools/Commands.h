// The m3idx CLI's subcommands; each file registers one on the CLI11 app and runs it.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace m3idx::cli {

// A registered command sets `run` when it is selected; main calls it and returns its exit code.
using Runner = std::function<int()>;

void addGenCommand(CLI::App &app, Runner &run);
void addRunCommand(CLI::App &app, Runner &run);
void addCheckCommand(CLI::App &app, Runner &run);
void addInspectCommand(CLI::App &app, Runner &run);
void addBenchCommand(CLI::App &app, Runner &run);
void addCacheCommand(CLI::App &app, Runner &run);
void addCacheBenchCommand(CLI::App &app, Runner &run);
void addCompileCommand(CLI::App &app, Runner &run);
void addEnvCommand(CLI::App &app, Runner &run);

// Prints "m3idx: error: MESSAGE" on stderr and returns the exit code for failures.
int fail(const std::string &message);

} // namespace m3idx::cli
