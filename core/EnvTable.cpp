#include "core/EnvTable.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace m3idx::env {

const std::vector<Variable> &table() {
  static const std::vector<Variable> vars = {
      {"M3IDX_OPT_LEVEL", "3", true, "LLVM optimization level for host kernels (0-3)"},
      {"M3IDX_CACHE_DIR", "", false,
       "kernel cache folder; empty: $XDG_CACHE_HOME/m3idx, else ~/.cache/m3idx"},
      {"M3IDX_CACHE_POLICY", "cache_size_bytes=2g:prune_after=30d", false,
       "size bound of the kernel cache, in LLVM's cache pruning policy syntax"},
      {"M3IDX_AOT_PATH", "", false,
       "':'-separated AOT bundle folders (m3idx compile --out) searched before the cache"},
      {"M3IDX_TRUST_SHARED_CACHE", "0", false,
       "1: use cache and AOT folders and entries owned by another user or writable by group/others"},
      {"M3IDX_RUN_ONLY", "0", false,
       "1: a kernel found neither in memory, bundles nor cache is an error, not a compile"},
      {"M3IDX_ALWAYS_COMPILE", "0", false, "1: ignore bundles and cache on reads (still write)"},
      {"M3IDX_DISABLE_COMPILER", "0", false,
       "1: any compile fails (proves a run uses only bundles and cache)"},
      {"M3IDX_DUMP", "", false,
       "stages to dump per kernel, comma-separated: dsl,mlir,llvm,asm,bin (also on cache hits)"},
      {"M3IDX_DUMP_DIR", "m3idx-dump", false, "folder for M3IDX_DUMP files"},
      {"M3IDX_CACHE_LOCK_TIMEOUT_S", "120", false,
       "seconds to wait for another process compiling the same kernel"},
      {"M3IDX_NUM_THREADS", "", false, "host launch threads; empty: all cores"},
      {"M3IDX_CUDA_LIBRARY", "libcuda.so.1", false, "CUDA driver library to dlopen"},
      {"M3IDX_PTXAS", "", false,
       "ptxas for sm_90 cubins; empty: ptxas on PATH or /usr/local/cuda/bin; 'none': PTX to the driver"},
      {"M3IDX_HIP_LIBRARY", "", false,
       "HIP runtime library to dlopen; empty: libamdhip64.so, then its versioned names"},
      {"M3IDX_NCCL_LIBRARY", "", false, "NCCL library to dlopen instead of libnccl.so.2"},
      {"M3IDX_RCCL_LIBRARY", "", false, "RCCL library to dlopen instead of librccl.so.1"},
  };
  return vars;
}

namespace {
const Variable &find(const char *name) {
  for (const Variable &v : table())
    if (std::strcmp(v.name, name) == 0)
      return v;
  std::fprintf(stderr, "m3idx: internal error: environment variable %s is not in env::table()\n",
               name);
  std::abort();
}
} // namespace

std::string get(const char *name) {
  const Variable &v = find(name);
  const char *value = std::getenv(name);
  return value && *value ? std::string(value) : std::string(v.defaultValue);
}

bool flag(const char *name) {
  std::string v = get(name);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

std::string codeChangingFingerprint() {
  std::string out;
  for (const Variable &v : table())
    if (v.changesCode)
      out += std::string(v.name) + "=" + get(v.name) + ";";
  return out;
}

} // namespace m3idx::env
