// libFuzzer target: an AOT bundle folder as the kernel store reads it (cache::findInBundles): the
// input is one bundle entry file. Found entries must be for the key asked; anything else is
// skipped and described, never a crash. Input starting with 'B' is made into a valid entry first
// (for the key asked, or another), so the key check past the decoder is reached too.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>

#include "cache/BundleReader.h"
#include "tests/fuzz/FuzzFolder.h"

namespace {

const std::string &bundle() {
  static const std::string dir = [] {
    std::string d = m3idx::fuzz::makeFolder("m3idx-fuzz-bundle");
    ::setenv("M3IDX_AOT_PATH", ("/nonexistent:" + d).c_str(), 1);
    ::setenv("M3IDX_RUN_ONLY", "1", 1); // describe, do not warn, per input
    return d;
  }();
  return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace m3idx;
  const std::string key = "0123abcd";
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (size > 0 && data[0] == 'B') {
    FuzzedDataProvider in(data + 1, size - 1);
    cache::Entry e;
    e.key = in.ConsumeBool() ? key : in.ConsumeRandomLengthString(16);
    e.kernel = in.ConsumeRandomLengthString(16);
    e.binary = in.ConsumeRemainingBytes<uint8_t>();
    bytes = cache::encodeEntry(e);
  }
  std::ofstream(bundle() + "/llvmcache-" + key, std::ios::binary | std::ios::trunc) << bytes;
  std::string unusable;
  StatusOr<std::optional<cache::Entry>> got = cache::findInBundles("llvmcache-" + key, key, unusable);
  if (!got.ok() || (*got && (*got)->key != key) || (!*got && unusable.empty()))
    std::abort();
  return 0;
}
