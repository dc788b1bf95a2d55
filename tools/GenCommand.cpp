// `m3idx gen`: write a generated case folder.
#include <iostream>

#include "casefile/CaseGenerator.h"
#include "tools/Commands.h"

namespace m3idx::cli {

namespace {

// "N" or "MIN:MAX".
bool parseRange(const std::string &text, Range &out) {
  try {
    size_t colon = text.find(':');
    size_t used = 0;
    if (colon == std::string::npos) {
      out.min = out.max = std::stoll(text, &used);
      return used == text.size();
    }
    std::string a = text.substr(0, colon), b = text.substr(colon + 1);
    size_t usedA = 0, usedB = 0;
    out.min = std::stoll(a, &usedA);
    out.max = std::stoll(b, &usedB);
    return usedA == a.size() && usedB == b.size();
  } catch (const std::exception &) {
    return false;
  }
}

struct GenArgs {
  GenOptions options;
  std::string out, mode = "realistic", context = "1000:4000", prefillContext = "64:4000",
                   prefillLen = "1:64";
};

int runGen(GenArgs &a) {
  if (a.mode == "realistic")
    a.options.mode = ValueMode::Realistic;
  else if (a.mode == "exact")
    a.options.mode = ValueMode::Exact;
  else
    return fail(fmt::format("--mode: expected realistic or exact, got '{}'", a.mode));
  for (auto [flag, text, dest] :
       {std::tuple{"--context", &a.context, &a.options.decodeContext},
        std::tuple{"--prefill-context", &a.prefillContext, &a.options.prefillContext},
        std::tuple{"--prefill-len", &a.prefillLen, &a.options.prefillQueryLen}})
    if (!parseRange(*text, *dest))
      return fail(fmt::format("{}: expected N or MIN:MAX, got '{}'", flag, *text));
  StatusOr<Case> c = generateCase(a.options);
  if (!c.ok())
    return fail(c.status().message());
  Status saved = saveCase(a.out, *c);
  if (!saved.ok())
    return fail(saved.message());
  const BatchView v = c->view();
  std::cout << fmt::format("wrote {}: H={} requests={} (decode {} x {} rows) rows={} pages={}\n",
                           a.out, v.params.numHeads, v.numRequests, v.params.numDecodes,
                           v.params.decodeQueryLen, v.numRows, v.numPages);
  return 0;
}

} // namespace

void addGenCommand(CLI::App &app, Runner &run) {
  auto args = std::make_shared<GenArgs>();
  GenOptions &o = args->options;
  CLI::App *cmd = app.add_subcommand("gen", "Generate a case folder (SPEC §8)");
  cmd->add_option("--out", args->out, "Case folder to write")->required();
  cmd->add_option("--seed", o.seed, "Random seed")->capture_default_str();
  cmd->add_option("--mode", args->mode, "realistic (Gaussian keys) or exact (exact fp32 sums)")
      ->capture_default_str();
  cmd->add_option("--heads", o.numHeads, "num_index_heads (1, 2, 4)")->capture_default_str();
  cmd->add_option("--decodes", o.numDecodes, "Decode requests")->capture_default_str();
  cmd->add_option("--decode-query-len", o.decodeQueryLen, "Rows per decode request")
      ->capture_default_str();
  cmd->add_option("--context", args->context, "Decode seq_lens, N or MIN:MAX")
      ->capture_default_str();
  cmd->add_option("--prefills", o.numPrefills, "Prefill requests")->capture_default_str();
  cmd->add_option("--prefill-len", args->prefillLen, "Prefill q_len, N or MIN:MAX")
      ->capture_default_str();
  cmd->add_option("--prefill-context", args->prefillContext, "Prefill seq_lens, N or MIN:MAX")
      ->capture_default_str();
  cmd->add_option("--init", o.initBlocks, "init_blocks")->capture_default_str();
  cmd->add_option("--local", o.localBlocks, "local_blocks")->capture_default_str();
  cmd->add_option("--nan-scales", o.nanScaleFraction, "Share of scale bytes made NaN")
      ->capture_default_str();
  cmd->add_option("--extra-pages", o.extraPages, "Unreferenced garbage pages")
      ->capture_default_str();
  cmd->callback([&run, args] { run = [args] { return runGen(*args); }; });
}

} // namespace m3idx::cli
