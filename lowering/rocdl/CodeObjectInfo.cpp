#include "lowering/rocdl/CodeObjectInfo.h"

#include <algorithm>

#include "llvm/BinaryFormat/ELF.h"
#include "llvm/BinaryFormat/MsgPackDocument.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

namespace m3idx::lowering {

StatusOr<CodeObjectInfo> readCodeObject(const std::string &bytes) {
  auto buffer = llvm::MemoryBuffer::getMemBuffer(bytes, "code object", false);
  auto file = llvm::object::ObjectFile::createELFObjectFile(buffer->getMemBufferRef());
  if (!file)
    return Status::error("code object: not an ELF file: " + llvm::toString(file.takeError()));
  auto *elf = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(file->get());
  if (!elf || elf->getArch() != llvm::Triple::amdgcn)
    return Status::error("code object: expected a 64-bit little-endian amdgcn ELF");
  CodeObjectInfo info;
  const auto &ef = elf->getELFFile();
  auto sections = ef.sections();
  if (!sections)
    return Status::error("code object: " + llvm::toString(sections.takeError()));
  for (const auto &shdr : *sections) {
    if (shdr.sh_type != llvm::ELF::SHT_NOTE)
      continue;
    llvm::Error err = llvm::Error::success();
    for (const auto &note : ef.notes(shdr, err)) {
      if (note.getName() != "AMDGPU" || note.getType() != llvm::ELF::NT_AMDGPU_METADATA)
        continue;
      llvm::msgpack::Document doc;
      llvm::ArrayRef<uint8_t> desc = note.getDesc(shdr.sh_addralign);
      if (!doc.readFromBlob(llvm::StringRef(reinterpret_cast<const char *>(desc.data()), desc.size()),
                            false))
        return Status::error("code object: unreadable AMDGPU metadata note");
      llvm::raw_string_ostream yaml(info.metadataYaml);
      doc.toYAML(yaml);
      auto &root = doc.getRoot().getMap(true);
      if (root.find(doc.getNode("amdhsa.target")) != root.end())
        info.target = root[doc.getNode("amdhsa.target")].getString().str();
      for (auto &k : root[doc.getNode("amdhsa.kernels")].getArray(true)) {
        auto &m = k.getMap(true);
        auto num = [&](const char *key) -> int64_t {
          auto node = doc.getNode(key);
          if (m.find(node) == m.end())
            return 0;
          auto &v = m[node];
          return v.getKind() == llvm::msgpack::Type::Int ? v.getInt() : static_cast<int64_t>(v.getUInt());
        };
        KernelResources r;
        r.name = m[doc.getNode(".name")].getString().str();
        r.kernargBytes = num(".kernarg_segment_size");
        r.vgprs = num(".vgpr_count");
        r.sgprs = num(".sgpr_count");
        r.agprs = num(".agpr_count");
        r.ldsBytes = num(".group_segment_fixed_size");
        r.scratchBytes = num(".private_segment_fixed_size");
        r.wavefrontSize = num(".wavefront_size");
        const int64_t granule = 8, perLane = 512;
        const int64_t regs = std::max<int64_t>(granule, (r.vgprs + r.agprs + granule - 1) / granule * granule);
        r.wavesPerSimd = std::min<int64_t>(8, perLane / regs);
        info.kernels.push_back(r);
      }
    }
    if (err)
      return Status::error("code object: " + llvm::toString(std::move(err)));
  }
  if (info.target.empty())
    return Status::error("code object: no AMDGPU metadata note");
  return info;
}

} // namespace m3idx::lowering
