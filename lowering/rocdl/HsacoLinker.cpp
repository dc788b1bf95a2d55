#include "lowering/rocdl/HsacoLinker.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "lld/Common/Driver.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Target/LLVM/ROCDL/Utils.h"
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/MC/MCContext.h"
#include "llvm/MC/MCDisassembler/MCDisassembler.h"
#include "llvm/MC/MCInst.h"
#include "llvm/MC/MCInstPrinter.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCRegisterInfo.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/MCTargetOptions.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include "core/AtomicFile.h"

LLD_HAS_DRIVER(elf)

namespace m3idx::lowering {

namespace {

constexpr const char *kTriple = "amdgcn-amd-amdhsa";
constexpr const char *kChip = "gfx950";

void initAmdgpu() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmParser();
    LLVMInitializeAMDGPUAsmPrinter();
    LLVMInitializeAMDGPUDisassembler();
  });
}

// A private temporary folder per call: lld reads and writes files.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    namespace fs = std::filesystem;
    static std::atomic<uint64_t> next{0};
    path = fs::temp_directory_path() / fmt::format("m3idx-hsaco-{}-{}", ::getpid(), next++);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

} // namespace

StatusOr<std::string> linkGfx950Hsaco(const std::string &isa) {
  initAmdgpu();
  mlir::MLIRContext ctx;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  auto object = mlir::ROCDL::assembleIsa(isa, kTriple, kChip, "", [&] {
    return mlir::emitError(mlir::UnknownLoc::get(&ctx));
  });
  // An assembler error is printed by MC and leaves no (or an empty) object rather than a failure.
  if (mlir::failed(object) || object->size() < 4 || std::string(object->data(), 4) != "\x7f" "ELF")
    return Status::error("gfx950: assembling the ISA failed" + (diagnostics.empty() ? "" : ": " + diagnostics));
  TempDir dir;
  const std::string in = (dir.path / "kernel.o").string(), out = (dir.path / "kernel.hsaco").string();
  M3IDX_RETURN_IF_ERROR(writeFileAtomically(in, std::string(object->data(), object->size())));
  std::string linkerOutput;
  llvm::raw_string_ostream log(linkerOutput);
  // lld's drivers keep global state: one link at a time in this process.
  static std::mutex mutex;
  lld::Result r;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const char *args[] = {"ld.lld", "-shared", in.c_str(), "-o", out.c_str()};
    r = lld::lldMain(args, log, log, {{lld::Gnu, &lld::elf::link}});
  }
  if (r.retCode != 0)
    return Status::error("gfx950: linking the code object (lld, in process) failed: " + linkerOutput);
  std::ifstream f(out, std::ios::binary);
  std::ostringstream bytes;
  bytes << f.rdbuf();
  if (!f || bytes.str().empty())
    return Status::error("gfx950: lld wrote no code object");
  return bytes.str();
}

StatusOr<std::string> disassembleGfx950(const std::string &hsaco) {
  initAmdgpu();
  auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(hsaco), "hsaco", false);
  auto file = llvm::object::ObjectFile::createELFObjectFile(buffer->getMemBufferRef());
  if (!file)
    return Status::error("gfx950: not an ELF code object: " + llvm::toString(file.takeError()));
  const llvm::Triple triple(kTriple);
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return Status::error("gfx950: " + error);
  std::unique_ptr<llvm::MCRegisterInfo> mri(target->createMCRegInfo(triple));
  llvm::MCTargetOptions options;
  std::unique_ptr<llvm::MCAsmInfo> mai(target->createMCAsmInfo(*mri, triple, options));
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple, kChip, ""));
  std::unique_ptr<llvm::MCInstrInfo> mii(target->createMCInstrInfo());
  if (!mri || !mai || !sti || !mii)
    return Status::error("gfx950: LLVM's AMDGPU target is incomplete in this build");
  llvm::MCContext mc(triple, mai.get(), mri.get(), sti.get());
  std::unique_ptr<llvm::MCDisassembler> disassembler(target->createMCDisassembler(*sti, mc));
  std::unique_ptr<llvm::MCInstPrinter> printer(
      target->createMCInstPrinter(triple, mai->getAssemblerDialect(), *mai, *mii, *mri));
  if (!disassembler || !printer)
    return Status::error("gfx950: no AMDGPU disassembler in this build");

  // Function labels by address.
  std::map<uint64_t, std::string> labels;
  for (const llvm::object::SymbolRef &sym : (*file)->symbols()) {
    auto type = sym.getType();
    auto name = sym.getName();
    auto address = sym.getAddress();
    if (type && name && address && *type == llvm::object::SymbolRef::ST_Function)
      labels[*address] = name->str();
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  for (const llvm::object::SectionRef &section : (*file)->sections()) {
    auto name = section.getName();
    if (!name || *name != ".text")
      continue;
    auto contents = section.getContents();
    if (!contents)
      return Status::error("gfx950: unreadable .text: " + llvm::toString(contents.takeError()));
    llvm::ArrayRef<uint8_t> bytes(reinterpret_cast<const uint8_t *>(contents->data()), contents->size());
    const uint64_t base = section.getAddress();
    os << "Disassembly of section .text:\n";
    for (uint64_t at = 0; at < bytes.size();) {
      if (auto l = labels.find(base + at); l != labels.end())
        os << fmt::format("\n{:016x} <{}>:\n", base + at, l->second); // objdump's label form
      llvm::MCInst inst;
      uint64_t size = 0;
      if (disassembler->getInstruction(inst, size, bytes.slice(at), base + at, llvm::nulls()) !=
          llvm::MCDisassembler::Success) {
        os << "\t<unknown>\n";
        size = 4;
      } else {
        printer->printInst(&inst, base + at, "", *sti, os);
        os << "\n";
      }
      at += size ? size : 4;
    }
  }
  return out;
}

} // namespace m3idx::lowering
