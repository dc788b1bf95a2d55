// `m3idx inspect`: list kernels, or print one kernel at a named stage for a target.
#include <iostream>

#include "kernels_src/KernelCatalog.h"
#include "lowering/Target.h"
#include "lowering/host/HostCompiler.h"
#include "tools/Commands.h"

namespace m3idx::cli {

namespace {

struct InspectArgs {
  bool list = false, printAfterAll = false, pipeline = false;
  std::string kernel, target = "host", emit = "dsl";
  int heads = 1, queryRows = 0;
};

int runInspect(const InspectArgs &a) {
  if (a.list) {
    for (kernels::KernelKind k : kernels::allKernels())
      std::cout << kernels::kernelName(k) << "\n";
    return 0;
  }
  if (a.kernel.empty())
    return fail("inspect: expected a KERNEL name or --list, got neither");
  std::optional<kernels::KernelKind> kind = kernels::kernelByName(a.kernel);
  if (!kind)
    return fail(fmt::format("KERNEL: expected one of score_decode, score_prefill, topk_decode, "
                            "topk_prefill, got '{}'",
                            a.kernel));
  if (a.target != "host")
    return fail(fmt::format("--target: expected host (gfx950 and sm_90 are not built yet), got "
                            "'{}'",
                            a.target));
  if (a.pipeline) {
    std::cout << lowering::makeHostTarget()->pipelineText() << "\n";
    return 0;
  }
  kernels::KernelConfig config = kernels::configFor(*kind, a.heads, a.queryRows ? a.queryRows : 4);
  if (a.queryRows && *kind != kernels::KernelKind::ScorePrefill)
    config.queryRows = a.queryRows;
  StatusOr<dsl::Kernel> k = kernels::buildKernel(*kind, config);
  if (!k.ok())
    return fail(k.status().message());
  static const std::map<std::string, lowering::Stage> stages = {
      {"dsl", lowering::Stage::Dsl}, {"mlir", lowering::Stage::Mlir},
      {"lowered", lowering::Stage::Lowered}, {"llvm", lowering::Stage::Llvm},
      {"asm", lowering::Stage::Asm}};
  auto stage = stages.find(a.emit);
  if (stage == stages.end())
    return fail(fmt::format("--emit: expected dsl, mlir, lowered, llvm or asm, got '{}'", a.emit));
  std::string perPass;
  StatusOr<std::string> text =
      lowering::hostStage(*k, stage->second, a.printAfterAll ? &perPass : nullptr);
  if (!text.ok())
    return fail(text.status().message());
  if (a.printAfterAll)
    std::cout << perPass;
  std::cout << fmt::format("// m3idx inspect {} --heads {} ({}) --target host --emit {}\n",
                           a.kernel, a.heads, config.str(), a.emit);
  if (stage->second != lowering::Stage::Dsl)
    std::cout << "// pipeline: " << lowering::makeHostTarget()->pipelineText() << "\n";
  std::cout << *text;
  return 0;
}

} // namespace

void addInspectCommand(CLI::App &app, Runner &run) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App *cmd = app.add_subcommand("inspect", "List kernels or print one at a compile stage");
  cmd->add_option("KERNEL", args->kernel, "score_decode, score_prefill, topk_decode, topk_prefill");
  cmd->add_flag("--list", args->list, "List kernel names, one per line");
  cmd->add_option("--heads", args->heads, "num_index_heads of the config")->capture_default_str();
  cmd->add_option("--query-rows", args->queryRows, "decode_query_len of the config (default 4)");
  cmd->add_option("--target", args->target, "host")->capture_default_str();
  cmd->add_option("--emit", args->emit, "dsl, mlir, lowered (LLVM dialect), llvm or asm")
      ->capture_default_str();
  cmd->add_flag("--print-ir-after-all", args->printAfterAll,
                "Also print the IR after every pipeline pass");
  cmd->add_flag("--pipeline", args->pipeline, "Print the target's pass pipeline and exit");
  cmd->callback([&run, args] { run = [args] { return runInspect(*args); }; });
}

} // namespace m3idx::cli
