// `m3idx env`: every environment variable m3idx reads, its current value, and whether it changes
// generated code (and so every cache key).
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/EnvTable.h"
#include "tools/Commands.h"

namespace m3idx::cli {

void addEnvCommand(CLI::App &app, Runner &run) {
  auto json = std::make_shared<bool>(false);
  CLI::App *cmd = app.add_subcommand("env", "Print the environment variables m3idx reads");
  cmd->add_flag("--json", *json, "JSON output");
  cmd->callback([&run, json] {
    run = [json] {
      if (*json) {
        nlohmann::ordered_json out;
        out["schema_version"] = 1;
        out["variables"] = nlohmann::json::array();
        for (const env::Variable &v : env::table())
          out["variables"].push_back({{"name", v.name}, {"value", env::get(v.name)},
                                      {"default", v.defaultValue}, {"changes_code", v.changesCode},
                                      {"description", v.description}});
        std::cout << out.dump(2) << "\n";
        return 0;
      }
      for (const env::Variable &v : env::table())
        std::cout << fmt::format("{:<28} {:<6} {:<40} {}\n", v.name,
                                 v.changesCode ? "code" : "-", "'" + env::get(v.name) + "'",
                                 v.description);
      return 0;
    };
  });
}

} // namespace m3idx::cli
