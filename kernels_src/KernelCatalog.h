// The indexer's kernels by name and the compile-time config that shapes their code. Everything
// else (sizes, init/local blocks, score width) is a run-time argument.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"
#include "kernels_src/LaunchPlan.h"

namespace m3idx::kernels {

enum class KernelKind { ScoreDecode, ScorePrefill, TopkDecode, TopkPrefill, TopkMerge };

// How a target runs score_prefill programs: each decoded key tile of `tokenTile` tokens is dotted
// with `columns` (rows x heads) query columns, on `warps` warps; GPU grids keep about
// `gpuPrograms` programs of at most `maxBlocksPerProgram` blocks (LaunchPlan.h's scoreGrid).
// Host and gfx950 programs: 16 columns and 16 tokens (one 16-wide matrix tile), one warp / wave,
// the decode grid's sizes. sm_90 programs are a warpgroup (4 warps) running wgmma m64n128k16 on 64
// tokens x 128 columns (lowering/nvvm/Sm90Wgmma.cpp), and take 64 blocks each: a program first
// stages its queries and a key table, which programs of 8 blocks spent much of their time on
// (bench/RESULTS.md: 4 x 32K H=1 score 2.06 ms with 8, 1.54 with 32, 1.49 with 64).
// `foldTokenPairs`: each tile's dots are folded in pairs of tokens (fold.max) before the running
// max, which then holds half as many values -- on sm_90 a thread's two tokens, 32 registers fewer
// at 128 columns. That made 128 columns pay: each decoded key tile feeds twice the products
// (score 1.48 ms at 64 columns, 1.42 folded, 1.35 at 128 folded). Short prompts
// keep runs of at least `minBlocksPerProgram` while 1024 programs remain: score 64 x 2K 0.24 ->
// 0.21 ms, 256 x 512 0.195 -> 0.154 (16 x 8K and 4 x 32K keep their grids).
struct PrefillForm {
  int columns = 16, tokenTile = 16, warps = 1;
  int64_t gpuPrograms = kGpuScorePrograms, maxBlocksPerProgram = kMaxBlocksPerProgram;
  int64_t minBlocksPerProgram = 1;
  bool foldTokenPairs = false;
};
inline constexpr PrefillForm kPrefillForm{}, kSm90PrefillForm{128, 64, 4, 2048, 64, 16, true};
// A target's prefill form, by its name ("sm_90": kSm90PrefillForm; "host", "gfx950": kPrefillForm).
PrefillForm prefillFormFor(const std::string &target);
// Rows of one prefill program: `columns` / heads.
inline constexpr int prefillRowTile(int numHeads, int columns = kPrefillForm.columns) {
  return numHeads >= 1 && numHeads <= columns ? columns / numHeads : 1;
}
// Key tokens a decode score program decodes and dots at once: the M of one 16x16 MFMA / MMA tile.
inline constexpr int kTokenTile = 16;

struct KernelConfig {
  int numHeads = 1;
  // Rows that share each key read: decode_query_len for decode kernels, the row tile for
  // score_prefill; unused (0) by topk_prefill.
  int queryRows = 4;
  // Key tokens per dot (a divisor of the 128-token block) and warps per GPU program.
  int tokenTile = kTokenTile, warps = 1;
  // score_prefill: fold each tile's dots over token pairs (m, m + 8) before the running max.
  bool foldTokenPairs = false;

  bool operator==(const KernelConfig &o) const {
    return numHeads == o.numHeads && queryRows == o.queryRows && tokenTile == o.tokenTile && warps == o.warps &&
           foldTokenPairs == o.foldTokenPairs;
  }
  // "heads=4,rows=4" (then ",tokens=T,warps=W" unless 16 and 1, then ",fold" if folding)
  std::string str() const;
};

const std::vector<KernelKind> &allKernels();
const char *kernelName(KernelKind k);
std::optional<KernelKind> kernelByName(const std::string &name);

// The config a kernel is built with for a step's heads and decode_query_len.
KernelConfig configFor(KernelKind k, int numHeads, int decodeQueryLen, PrefillForm prefill = kPrefillForm);

StatusOr<dsl::Kernel> buildKernel(KernelKind k, const KernelConfig &config);

} // namespace m3idx::kernels
