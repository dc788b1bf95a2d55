// libFuzzer target: sm_90's layout pass (lowering/nvvm/Sm90Layouts.cpp) on any tile kernel the
// parser and verifiers accept: an error or a kernel whose layouts verify (every convert_layout
// between two layouts of the same lanes); never a crash, and run again on its own output it gives
// the same text (layouts are assigned afresh).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lowering/nvvm/Sm90Layouts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace m3idx;
  StatusOr<std::string> once =
      lowering::assignSm90LayoutsToText(std::string(reinterpret_cast<const char *>(data), size));
  if (!once.ok())
    return 0;
  StatusOr<std::string> twice = lowering::assignSm90LayoutsToText(*once);
  if (!twice.ok() || *twice != *once)
    std::abort();
  return 0;
}
