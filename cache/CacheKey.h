// The cache key of a compiled kernel: BLAKE3 over a canonical, length-prefixed encoding of
// everything that changes its code. Adding an input means adding a field here (and a test that
// changing it changes the key).
#pragma once

#include <string>

namespace m3idx::cache {

inline constexpr int kFormatVersion = 1;

struct KeyInputs {
  std::string toolchain;   // m3idx version and build id, LLVM version
  std::string kernel;      // kernel name
  std::string dsl;         // the kernel's canonical DSL text
  std::string config;      // its compile-time config
  std::string target;      // target fingerprint: kind, arch, full feature string, pipeline
  std::string options;     // compile options (e.g. opt level)
  std::string environment; // code-changing environment variables (env::codeChangingFingerprint)
};

// 64 lowercase hex digits.
std::string cacheKey(const KeyInputs &inputs);

} // namespace m3idx::cache
