// libFuzzer target: the .npy reader on any bytes. Accepted arrays must hold exactly their shape's
// bytes (what every consumer relies on).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "casefile/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace m3idx;
  StatusOr<npy::Array> a = npy::decode(std::string_view(reinterpret_cast<const char *>(data), size), "fuzz.npy");
  if (a.ok() && a->bytes.size() != static_cast<size_t>(a->numel()) * npy::dtypeSize(a->dtype))
    std::abort();
  return 0;
}
