// Case folders of SPEC §8 (case.json + five .npy arrays): loading with full shape, dtype and
// value validation (SPEC §7), saving, and the owned arrays behind a BatchView.
#pragma once

#include <string>

#include "casefile/Npy.h"
#include "core/Batch.h"
#include "core/Status.h"

namespace m3idx {

inline constexpr const char *kCaseFormat = "m3idx-case/1";

struct Case {
  IndexerParams params;
  npy::Array q;             // u1 [T, H, 128]
  npy::Array kv;            // u1 [P, 9216]
  npy::Array blockTable;    // i4 [R, M]
  npy::Array seqLens;       // i4 [R]
  npy::Array queryStartLoc; // i4 [R + 1]

  BatchView view() const;
};

// Checks dtypes and shapes of the arrays against each other and the params (names the file).
Status validateCaseShapes(const Case &c);

// Reads and validates everything: case.json, the arrays, their shapes, then validateBatch.
StatusOr<Case> loadCase(const std::string &dir);

// Writes case.json and the arrays into dir (created if missing).
Status saveCase(const std::string &dir, const Case &c);

std::string caseJson(const IndexerParams &params);

} // namespace m3idx
