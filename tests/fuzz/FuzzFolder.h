// A private folder under /tmp made once per fuzzing process (mkdtemp: 0700, so the kernel cache's
// trust checks accept it), for targets whose input must be files.
#pragma once

#include <cstdlib>
#include <string>

#include <unistd.h>

namespace m3idx::fuzz {

inline std::string makeFolder(const char *prefix) {
  std::string d = std::string("/tmp/") + prefix + "-XXXXXX";
  if (!::mkdtemp(d.data()))
    std::abort();
  return d;
}

} // namespace m3idx::fuzz
