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

// Rows of one prefill program: each decoded key tile is reused by this many query rows. 16 / heads,
// so a program's (row, head) columns fill one 16-wide matrix tile on every target.
inline constexpr int prefillRowTile(int numHeads) { return numHeads >= 1 && numHeads <= 16 ? 16 / numHeads : 1; }
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
KernelConfig configFor(KernelKind k, int numHeads, int decodeQueryLen);

StatusOr<dsl::Kernel> buildKernel(KernelKind k, const KernelConfig &config);

} // namespace m3idx::kernels
