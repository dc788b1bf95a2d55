// `m3idx check`: compare an output folder's topk.npy (and score.npy) with exact scores.
#include <filesystem>
#include <iostream>

#include "casefile/CaseFile.h"
#include "core/Spec.h"
#include "reference/TopkCheck.h"
#include "tools/Commands.h"

namespace m3idx::cli {

namespace {

struct CheckArgs {
  std::string caseDir, outDir;
};

Status expectShape(const npy::Array &a, const std::string &name, npy::DType dtype,
                   const std::vector<int64_t> &shape) {
  if (a.dtype != dtype || a.shape != shape)
    return invalidArgument(name, fmt::format("{} {}", npy::dtypeName(dtype), npy::shapeString(shape)),
                           fmt::format("{} {}", npy::dtypeName(a.dtype), npy::shapeString(a.shape)));
  return Status();
}

int runCheck(const CheckArgs &a) {
  StatusOr<Case> c = loadCase(a.caseDir);
  if (!c.ok())
    return fail(c.status().message());
  const BatchView v = c->view();
  const std::string topkPath = (std::filesystem::path(a.outDir) / "topk.npy").string();
  StatusOr<npy::Array> topk = npy::read(topkPath);
  if (!topk.ok())
    return fail(topk.status().message());
  Status shape = expectShape(*topk, topkPath, npy::DType::I32,
                             {v.params.numHeads, v.numRows, spec::kTopkBlocks});
  if (!shape.ok())
    return fail(shape.message());
  reference::CheckReport report = reference::checkTopk(
      v, std::span<const int32_t>(topk->as<int32_t>(), static_cast<size_t>(topk->numel())));
  const std::string scorePath = (std::filesystem::path(a.outDir) / "score.npy").string();
  bool scoresChecked = false;
  if (std::filesystem::exists(scorePath)) {
    StatusOr<npy::Array> score = npy::read(scorePath);
    if (!score.ok())
      return fail(score.status().message());
    const int64_t W = spec::scoreWidth(planRows(v).maxNblk);
    Status s = expectShape(*score, scorePath, npy::DType::F32, {v.params.numHeads, v.numRows, W});
    if (!s.ok())
      return fail(s.message());
    reference::checkScores(
        v, std::span<const float>(score->as<float>(), static_cast<size_t>(score->numel())), W,
        report);
    scoresChecked = true;
  }
  for (const std::string &p : report.problems)
    std::cout << "  " << p << "\n";
  std::cout << fmt::format("{}: {} head-rows checked, {} near-tie swaps, {} mismatches{}\n",
                           report.ok() ? "OK" : "MISMATCH", report.rowsChecked,
                           report.nearTieSwaps, report.mismatches,
                           scoresChecked ? fmt::format("; max score error {:.3g} (bound there "
                                                       "{:.3g})",
                                                       report.maxScoreError,
                                                       report.maxScoreErrorBound)
                                         : "");
  return report.ok() ? 0 : 1;
}

} // namespace

void addCheckCommand(CLI::App &app, Runner &run) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App *cmd = app.add_subcommand(
      "check", "Compare OUTDIR/topk.npy (and score.npy) with exact scores, allowing swaps only "
               "among near-ties");
  cmd->add_option("CASE", args->caseDir, "Case folder")->required();
  cmd->add_option("OUTDIR", args->outDir, "Folder with topk.npy")->required();
  cmd->callback([&run, args] { run = [args] { return runCheck(*args); }; });
}

} // namespace m3idx::cli
