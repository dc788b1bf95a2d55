// Resolving a C entry point from a dlopen'ed library into a typed function pointer, with an error
// that names the library and the symbol. Shared by the CUDA driver and NCCL/RCCL loaders.
#pragma once

#include <dlfcn.h>
#include <string>

#include "core/Status.h"

namespace m3idx::runtime {

template <typename Fn>
Status resolveSymbol(void *handle, const std::string &library, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return fn ? Status() : Status::error(fmt::format("{}: missing symbol {}", library, name));
}

} // namespace m3idx::runtime
