// `m3idx inspect`: list kernels, or print one kernel at a named stage for a target.
#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cache/EntryFile.h"

#include "kernels_src/KernelCatalog.h"
#include "tuning/TargetRegistry.h"
#include "lowering/Target.h"
#include "lowering/host/HostCompiler.h"
#include "lowering/GpuCompiler.h"
#include "lowering/rocdl/HsacoLinker.h"
#include "lowering/rocdl/CodeObjectInfo.h"
#include "tile/TileText.h"
#include "core/AtomicFile.h"
#include "core/EnvTable.h"
#include "tools/Commands.h"

namespace m3idx::cli {

namespace {

struct InspectArgs {
  bool list = false, printAfterAll = false, pipeline = false, json = false, fusedTopk = false, keyImage = false;
  std::string kernel, target = "host", emit = "dsl", out, tuning;
  int heads = 1, queryRows = 0;
  int64_t requests = 0; // 0: a step past the table's small-step rule
};

// KERNEL may instead name a cache entry file or an AOT bundle folder.
int inspectArtifact(const InspectArgs &a) {
  namespace fs = std::filesystem;
  if (fs::is_directory(a.kernel)) {
    std::ifstream in(fs::path(a.kernel) / "manifest.json");
    if (!in)
      return fail(fmt::format("{}: expected an AOT bundle with manifest.json, got a folder without "
                              "one",
                              a.kernel));
    nlohmann::json manifest = nlohmann::json::parse(in, nullptr, false);
    if (manifest.is_discarded())
      return fail(fmt::format("{}/manifest.json: expected valid JSON, got a parse error", a.kernel));
    if (a.json) {
      std::cout << manifest.dump(2) << "\n";
      return 0;
    }
    std::cout << fmt::format("bundle {} (format {}, {}):\n", a.kernel,
                             manifest.value("format_version", 0), manifest.value("producer", "?"));
    for (const auto &e : manifest["entries"])
      std::cout << fmt::format("  {:<6} {:<14} {:<16} {:>8} B  {}\n", e.value("target", "?"),
                               e.value("kernel", "?"), e.value("config", "?"), e.value("bytes", 0),
                               e.value("file", "?"));
    return 0;
  }
  std::ifstream in(a.kernel, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StatusOr<cache::Entry> e = cache::decodeEntry(bytes, a.kernel);
  if (!e.ok())
    return fail(e.status().message());
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  j["file"] = a.kernel;
  j["producer"] = e->producer;
  j["target"] = e->target;
  j["kernel"] = e->kernel;
  j["config"] = e->config;
  j["key"] = e->key;
  j["symbol"] = e->symbol;
  j["binary_bytes"] = e->binary.size();
  j["metadata"] = nlohmann::json::parse(e->metadata, nullptr, false);
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  for (const auto &[k, v] : j.items())
    std::cout << fmt::format("{:<14} {}\n", k, v.is_string() ? v.get<std::string>() : v.dump());
  return 0;
}

// gfx950 code object stages: the .hsaco itself, its kernel metadata, its disassembly.
int inspectHsaco(const InspectArgs &a, const dsl::Kernel &k, const lowering::Target &target) {
  StatusOr<std::string> hsaco = lowering::gpuStage(k, target, lowering::GpuStage::Binary);
  if (!hsaco.ok())
    return fail(hsaco.status().message());
  if (a.emit == "bin") {
    if (a.out.empty())
      return fail("--out: expected a file for --emit bin, got none");
    Status s = writeFileAtomically(a.out, *hsaco);
    if (!s.ok())
      return fail(s.message());
    std::cout << fmt::format("wrote {} ({} bytes)\n", a.out, hsaco->size());
    return 0;
  }
  if (a.emit == "meta") {
    StatusOr<lowering::CodeObjectInfo> info = lowering::readCodeObject(*hsaco);
    if (!info.ok())
      return fail(info.status().message());
    if (!a.json) {
      std::cout << info->metadataYaml;
      return 0;
    }
    nlohmann::ordered_json j;
    j["schema_version"] = 1;
    j["target"] = info->target;
    j["kernels"] = nlohmann::json::array();
    for (const auto &r : info->kernels)
      j["kernels"].push_back({{"name", r.name}, {"kernarg_bytes", r.kernargBytes},
                              {"vgprs", r.vgprs}, {"sgprs", r.sgprs}, {"agprs", r.agprs},
                              {"lds_bytes", r.ldsBytes}, {"scratch_bytes", r.scratchBytes},
                              {"wavefront_size", r.wavefrontSize},
                              {"waves_per_simd_estimate", r.wavesPerSimd}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  // asm: the code object's instructions through LLVM's MC disassembler, in process.
  auto text = lowering::disassembleGfx950(*hsaco);
  if (!text.ok())
    return fail(text.status().message());
  std::cout << *text;
  return 0;
}

int runInspect(const InspectArgs &a) {
  if (a.list) {
    for (kernels::KernelKind k : kernels::allKernels())
      std::cout << kernels::kernelName(k) << "\n";
    return 0;
  }
  if (a.kernel.empty())
    return fail("inspect: expected a KERNEL name or --list, got neither");
  std::optional<kernels::KernelKind> kind = kernels::kernelByName(a.kernel);
  if (!kind && std::filesystem::exists(a.kernel))
    return inspectArtifact(a);
  if (!kind)
    return fail(fmt::format("KERNEL: expected one of score_decode, score_prefill, topk_decode, "
                            "topk_prefill, got '{}'",
                            a.kernel));
  if (!tuning::targetNamed(a.target).ok())
    return fail(fmt::format("--target: expected {}, got '{}'", tuning::targetNameList(), a.target));
  StatusOr<std::unique_ptr<lowering::Target>> made = lowering::makeTarget(a.target);
  if (!made.ok())
    return fail(made.status().message());
  std::unique_ptr<lowering::Target> target = std::move(*made);
  if (a.pipeline) {
    std::cout << target->pipelineText() << "\n";
    return 0;
  }
  StatusOr<const tuning::TargetTuning *> tuning = tuning::tuningFor(a.tuning.empty() ? a.target : a.tuning);
  if (!tuning.ok())
    return fail("--tuning: " + tuning.status().message());
  kernels::KernelConfig config = (*tuning)->configFor(*kind, a.heads, a.queryRows ? a.queryRows : 4,
                                                              a.requests > 0 ? a.requests : tuning::TargetTuning::kLargeStep);
  if (a.queryRows && *kind != kernels::KernelKind::ScorePrefill)
    config.queryRows = a.queryRows;
  if (a.fusedTopk) {
    if (*kind != kernels::KernelKind::ScorePrefill || (*tuning)->fusedTopkTrip == 0)
      return fail(fmt::format("--fused-topk: expected score_prefill on a table that fuses its top-k, got {} on {}",
                              a.kernel, (*tuning)->target));
    config.fusedTopkTrip = (*tuning)->fusedTopkTrip;
  }
  if (a.keyImage) {
    if (*kind != kernels::KernelKind::ScorePrefill || a.fusedTopk)
      return fail(fmt::format("--key-image: expected score_prefill without --fused-topk, got {}{}", a.kernel,
                              a.fusedTopk ? " with --fused-topk" : ""));
    config.keyImage = true;
  }
  StatusOr<dsl::Kernel> k = kernels::buildKernel(*kind, config);
  if (!k.ok())
    return fail(k.status().message());
  // What --emit may name follows the target's binary kind (its Target object), not its name: the
  // host's stages, or a GPU form's (layouts first) and its object (PTX text, or a gfx950 HSACO's
  // bytes, metadata and disassembly).
  static const std::map<std::string, lowering::Stage> hostStages = {
      {"mlir", lowering::Stage::Mlir}, {"lowered", lowering::Stage::Lowered},
      {"llvm", lowering::Stage::Llvm}, {"asm", lowering::Stage::Asm}};
  static const std::map<std::string, lowering::GpuStage> gpuStages = {
      {"layouts", lowering::GpuStage::Layouts}, {"mlir", lowering::GpuStage::Mlir},
      {"lowered", lowering::GpuStage::Lowered}, {"llvm", lowering::GpuStage::Llvm}};
  const lowering::BinaryKind binary = target->binaryKind();
  const bool host = binary == lowering::BinaryKind::HostJit, hsaco = binary == lowering::BinaryKind::Hsaco;
  const char *expected = host    ? "dsl, tile, mlir, lowered, llvm or asm"
                         : hsaco ? "dsl, tile, layouts, mlir, lowered, llvm, bin, meta or asm"
                                 : "dsl, tile, layouts, mlir, lowered, llvm or ptx";
  std::string perPass;
  StatusOr<std::string> text = Status::error("");
  if (a.emit == "tile") { // the same for every target (--emit layouts: after its layout pass)
    text = tile::tileText(*k);
  } else if (a.emit == "dsl") {
    text = k->print();
  } else if (auto h = hostStages.find(a.emit); host && h != hostStages.end()) {
    text = lowering::hostStage(*k, h->second, a.printAfterAll ? &perPass : nullptr);
  } else if (auto g = gpuStages.find(a.emit); !host && g != gpuStages.end()) {
    text = lowering::gpuStage(*k, *target, g->second, a.printAfterAll ? &perPass : nullptr);
  } else if (binary == lowering::BinaryKind::Ptx && a.emit == "ptx") {
    text = lowering::gpuStage(*k, *target, lowering::GpuStage::Binary, a.printAfterAll ? &perPass : nullptr);
  } else if (hsaco && (a.emit == "bin" || a.emit == "meta" || a.emit == "asm")) {
    return inspectHsaco(a, *k, *target);
  } else {
    return fail(fmt::format("--emit: expected {} for {}, got '{}'", expected, a.target, a.emit));
  }
  if (!text.ok())
    return fail(text.status().message());
  if (a.printAfterAll)
    std::cout << perPass;
  std::cout << fmt::format("// m3idx inspect {} --heads {} ({}) --target {} --emit {}\n",
                           a.kernel, a.heads, config.str(), a.target, a.emit);
  if (a.emit != "dsl")
    std::cout << "// pipeline: " << target->pipelineText() << "\n";
  std::cout << *text;
  return 0;
}

} // namespace

void addInspectCommand(CLI::App &app, Runner &run) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App *cmd = app.add_subcommand("inspect", "List kernels or print one at a compile stage");
  cmd->add_option("KERNEL", args->kernel,
                  "score_decode, score_prefill, topk_decode, topk_prefill, or a cache entry file "
                  "or AOT bundle folder");
  cmd->add_flag("--json", args->json, "JSON output for a cache entry, a bundle or gfx950 meta");
  cmd->add_option("--out", args->out, "File for --emit bin (gfx950 .hsaco)");
  cmd->add_flag("--list", args->list, "List kernel names, one per line");
  cmd->add_option("--heads", args->heads, "num_index_heads of the config")->capture_default_str();
  cmd->add_option("--query-rows", args->queryRows, "decode_query_len of the config (default 4)");
  cmd->add_option("--requests", args->requests,
                  "decode requests of the step the config is for (a target may score small steps in another form; "
                  "default: a large step)");
  cmd->add_option("--target", args->target, "host, sm_90 or gfx950")->capture_default_str();
  cmd->add_flag("--fused-topk", args->fusedTopk,
                "score_prefill: the form whose programs top their own rows (the table's fusedTopkTrip)");
  cmd->add_flag("--key-image", args->keyImage, "score_prefill: the form that reads the step's key image (decode_keys')");
  cmd->add_option("--tuning", args->tuning,
                  "build the config this target's tuning table gives (host, sm_90, gfx950; default: --target's)");
  cmd->add_option("--emit", args->emit,
                  "dsl, tile (the m3idx tile dialect), layouts (GPU: the tile dialect after the target's layout pass, each dot's unit), mlir, lowered (LLVM/NVVM/ROCDL dialect), "
                  "llvm or asm (host), ptx (sm_90), "
                  "bin, meta or asm (gfx950)")
      ->capture_default_str();
  cmd->add_flag("--print-ir-after-all", args->printAfterAll,
                "Also print the IR after every pipeline pass");
  cmd->add_flag("--pipeline", args->pipeline, "Print the target's pass pipeline and exit");
  cmd->callback([&run, args] { run = [args] { return runInspect(*args); }; });
}

} // namespace m3idx::cli
