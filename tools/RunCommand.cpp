// `m3idx run`: run a case on a backend and write topk.npy (and score.npy); on a GPU with
// --indexer, through the Indexer API on device buffers, as an inference engine calls it.
#include <chrono>
#include <iostream>

#include "casefile/CaseFile.h"
#include "reference/ReferenceIndexer.h"
#include "runtime/Backend.h"
#include "runtime/HostBackend.h"
#include "runtime/api/InProcessCp.h"
#include "tools/Commands.h"
#include "tools/GpuSteps.h"
#include "tools/OutputFiles.h"

namespace m3idx::cli {

namespace {

struct RunArgs {
  std::string caseDir, out, backend = "ref";
  bool scores = false, indexer = false, deviceTables = false;
  int cp = 0;
};

// One step through the Indexer API on the GPU's buffers, written as a backend's run is.
int runIndexer(const RunArgs &a) {
  if (a.backend != "cuda" && a.backend != "hip")
    return fail(fmt::format("--indexer: expected --backend cuda or hip, got {}", a.backend));
  if (a.scores || a.cp)
    return fail(fmt::format("--indexer: expected no {} (forward() returns the top-k only), got it",
                            a.scores ? "--scores" : "--cp"));
  StatusOr<Case> c = loadCase(a.caseDir);
  if (!c.ok())
    return fail(c.status().message());
  const BatchView v = c->view();
  auto start = std::chrono::steady_clock::now();
  StatusOr<std::vector<int32_t>> topk = runThroughIndexer(a.backend, v, a.deviceTables);
  if (!topk.ok())
    return fail(topk.status().message());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  IndexerOutput out;
  out.numHeads = v.params.numHeads;
  out.numRows = v.numRows;
  out.topk = std::move(topk).value();
  if (Status written = writeOutput(a.out, out, false); !written.ok())
    return fail(written.message());
  std::cout << fmt::format("{}: Indexer::forward on {} (block table on the {}), H={} rows={}: {:.2f} ms with "
                           "warm-up; wrote {}\n",
                           a.caseDir, a.backend, a.deviceTables ? "device" : "host", out.numHeads, out.numRows,
                           ms, a.out);
  return 0;
}

int runRun(const RunArgs &a) {
  if (a.indexer)
    return runIndexer(a);
  if (a.deviceTables)
    return fail("--device-tables: expected --indexer with it, got no --indexer");
  StatusOr<std::unique_ptr<runtime::Backend>> backend = runtime::makeBackend(a.backend);
  if (!backend.ok())
    return fail(backend.status().message());
  if (a.cp && a.backend == "host" && a.scores)
    return fail("--scores: expected no --cp 4 with --backend host (each rank keeps only its own "
                "head's scores), got both");
  if (a.cp != 0 && a.cp != 4)
    return fail(fmt::format("--cp: expected 4 (WORLD), got {}", a.cp));
  StatusOr<Case> c = loadCase(a.caseDir);
  if (!c.ok())
    return fail(c.status().message());
  const BatchView v = c->view();
  if (a.cp && v.params.numHeads != a.cp)
    return fail(fmt::format("--cp: expected a case with num_index_heads == {} (one head per "
                            "simulated rank), got {}",
                            a.cp, v.params.numHeads));
  auto start = std::chrono::steady_clock::now();
  std::string fallback;
  StatusOr<IndexerOutput> out =
      !a.cp                ? (*backend)->run(v, runtime::RunOptions{a.scores})
      : a.backend == "ref" ? reference::runReferenceDecodeCp(v, a.cp, &fallback)
                           : runtime::runHostDecodeCp(v, a.cp, &fallback);
  if (!out.ok())
    return fail(out.status().message());
  if (!fallback.empty() && a.backend == "ref") // host ranks log their own warning
    std::cerr << "m3idx: warning: " << fallback << "; decode rows scored locally\n";
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();
  Status written = writeOutput(a.out, *out, a.scores);
  if (!written.ok())
    return fail(written.message());
  std::string kernels;
  if (auto *host = dynamic_cast<runtime::HostBackend *>(backend->get())) {
    int counts[3] = {0, 0, 0};
    for (const runtime::KernelRecord &r : host->kernelRecords())
      ++counts[static_cast<int>(r.source)];
    kernels = fmt::format(" (kernels: {} compiled, {} from disk cache, {} from AOT bundles)",
                          counts[0], counts[1], counts[2]);
  }
  std::cout << fmt::format("{}: backend {}{}, H={} rows={} W={}: {:.2f} ms{}; wrote {}\n", a.caseDir,
                           a.backend,
                           !a.cp              ? ""
                           : fallback.empty() ? fmt::format(" (decode CP over {} ranks)", a.cp)
                                              : " (decode CP not served: scored locally)",
                           out->numHeads, out->numRows, out->scoreWidth, ms, kernels, a.out);
  return 0;
}

} // namespace

void addRunCommand(CLI::App &app, Runner &run) {
  auto args = std::make_shared<RunArgs>();
  CLI::App *cmd = app.add_subcommand("run", "Run a case folder, write topk.npy (and score.npy)");
  cmd->add_option("CASE", args->caseDir, "Case folder")->required();
  cmd->add_option("--out", args->out, "Output folder")->required();
  cmd->add_option("--backend", args->backend, "ref (scalar reference), host (JIT), cuda (sm_90) or hip (gfx950)")->capture_default_str();
  cmd->add_flag("--scores", args->scores, "Also write score.npy [H, T, W]");
  cmd->add_option("--cp", args->cp, "Decode context parallelism over 4 in-process ranks (head h on rank h)");
  cmd->add_flag("--indexer", args->indexer,
                "GPU: through Indexer::forward on device buffers (q, kv, top-k), metadata on the host");
  cmd->add_flag("--device-tables", args->deviceTables, "With --indexer: the block table on the device too");
  cmd->callback([&run, args] { run = [args] { return runRun(*args); }; });
}

} // namespace m3idx::cli
