// libFuzzer target: the kernel cache entry format, which both the disk cache and AOT bundles read
// (cache/BundleReader's findInBundles decodes bundle entries with the same decodeEntry). Input
// starting with 'E' builds an entry from the fuzzer's bytes and checks that it decodes back equal
// (the decoder past the checksum, which raw bytes seldom pass) and that a flipped byte is refused;
// any other input is decoded raw, which must never crash.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>

#include "cache/EntryFile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace m3idx;
  if (size == 0 || data[0] != 'E') {
    (void)cache::decodeEntry(std::string_view(reinterpret_cast<const char *>(data), size), "fuzz");
    return 0;
  }
  FuzzedDataProvider in(data + 1, size - 1);
  cache::Entry e;
  for (std::string *field : {&e.producer, &e.target, &e.kernel, &e.config, &e.key, &e.symbol, &e.metadata})
    *field = in.ConsumeRandomLengthString(64);
  e.binary = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 512));
  const size_t flip = in.ConsumeIntegral<size_t>();
  std::string bytes = cache::encodeEntry(e);
  StatusOr<cache::Entry> back = cache::decodeEntry(bytes, "fuzz");
  if (!back.ok() || back->producer != e.producer || back->target != e.target || back->kernel != e.kernel ||
      back->config != e.config || back->key != e.key || back->symbol != e.symbol ||
      back->metadata != e.metadata || back->binary != e.binary)
    std::abort();
  bytes[flip % bytes.size()] ^= 0x20;
  if (cache::decodeEntry(bytes, "fuzz").ok()) // the checksum covers every byte
    std::abort();
  return 0;
}
