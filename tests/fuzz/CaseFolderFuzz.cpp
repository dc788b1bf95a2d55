// libFuzzer target: a case folder as `m3idx run` reads it. The input is the folder's six files
// (case.json, q.npy, kv.npy, block_table.npy, seq_lens.npy, query_start_loc.npy) joined by the
// marker "@@M3IDX@" (tests/fuzz/pack_case.py makes seeds from real cases). A case that loads has
// passed validateBatch, so the reference indexer must then run on it without a fault: whatever the
// validation lets through is safe to read.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>


#include "casefile/CaseFile.h"
#include "reference/ReferenceIndexer.h"
#include "tests/fuzz/FuzzFolder.h"

namespace {

const char *const kFiles[] = {"case.json", "q.npy", "kv.npy", "block_table.npy", "seq_lens.npy",
                              "query_start_loc.npy"};

const std::string &folder() {
  static const std::string dir = m3idx::fuzz::makeFolder("m3idx-fuzz-case");
  return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace m3idx;
  constexpr std::string_view kMarker = "@@M3IDX@";
  std::string_view rest(reinterpret_cast<const char *>(data), size);
  for (const char *name : kFiles) {
    const size_t cut = rest.find(kMarker);
    const std::string_view part = rest.substr(0, cut);
    std::ofstream(folder() + "/" + name, std::ios::binary | std::ios::trunc).write(part.data(), part.size());
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + kMarker.size());
  }
  StatusOr<Case> c = loadCase(folder());
  if (c.ok() && !reference::runReference(c->view(), true).ok())
    std::abort(); // a validated case the reference refuses: validation and reference disagree
  return 0;
}
