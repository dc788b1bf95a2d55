// Linked only into the static archive (M3IDX_STATIC_LLVM). lld's ELF driver, which links gfx950
// code objects in process, brings LLVM's LTO backend, and Debian builds that backend to register
// Polly as a static pass plugin. Our links never run LTO (one relocatable object in, no bitcode),
// so instead of Polly's library this registers a plugin that adds nothing.
#include "llvm/Plugins/PassPlugin.h"

llvm::PassPluginLibraryInfo getPollyPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "m3idx-no-polly", "0", [](llvm::PassBuilder &) {}};
}
