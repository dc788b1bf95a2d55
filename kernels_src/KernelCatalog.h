// The indexer's kernels by name and the compile-time config that shapes their code. Everything
// else (sizes, init/local blocks, score width) is a run-time argument.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"

namespace m3idx::kernels {

enum class KernelKind { ScoreDecode, ScorePrefill, TopkDecode, TopkPrefill, TopkMerge };

// Columns (rows x heads) of one prefill program: each decoded key tile is dotted with this many.
// 16 fill one 16-wide matrix tile on every target. sm_90 programs take 64, their mma B fragments
// in shared memory: prefill 4 x 32K 13% faster on the H200 (3.76 -> 3.27 ms at H=1; 16 rows with
// 2 column tiles in registers, or 32 with 4 at 217 registers, were slower; bench/RESULTS.md).
inline constexpr int kPrefillColumns = 16, kSm90PrefillColumns = 64;
// A target's prefill columns, by its name ("sm_90": 64; "host", "gfx950": 16).
int prefillColumnsFor(const std::string &target);
// Rows of one prefill program: `columns` / heads.
inline constexpr int prefillRowTile(int numHeads, int columns = kPrefillColumns) {
  return numHeads >= 1 && numHeads <= columns ? columns / numHeads : 1;
}
// Key tokens a score program decodes and dots at once: the M of one 16x16 MFMA / MMA tile.
inline constexpr int kTokenTile = 16;

struct KernelConfig {
  int numHeads = 1;
  // Rows that share each key read: decode_query_len for decode kernels, the row tile for
  // score_prefill; unused (0) by topk_prefill.
  int queryRows = 4;

  bool operator==(const KernelConfig &o) const {
    return numHeads == o.numHeads && queryRows == o.queryRows;
  }
  std::string str() const; // "heads=4,rows=4"
};

const std::vector<KernelKind> &allKernels();
const char *kernelName(KernelKind k);
std::optional<KernelKind> kernelByName(const std::string &name);

// The config a kernel is built with for a step's heads and decode_query_len.
KernelConfig configFor(KernelKind k, int numHeads, int decodeQueryLen, int prefillColumns = kPrefillColumns);

StatusOr<dsl::Kernel> buildKernel(KernelKind k, const KernelConfig &config);

} // namespace m3idx::kernels
