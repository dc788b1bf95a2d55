#include "lowering/host/HostCompiler.h"

#include <chrono>
#include <functional>

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <atomic>
#include <mutex>

#include "core/EnvTable.h"
#include "m3idx_build_id.h"
#include "lowering/host/HostPatterns.h"
#include "lowering/Pipeline.h"

namespace m3idx::lowering {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void initNativeTarget() {
  static bool done = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)done;
}

// This machine's CPU and features, or `cpu` with that CPU's default features.
StatusOr<std::unique_ptr<llvm::TargetMachine>> hostMachine(const std::string &cpu = "") {
  initNativeTarget();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return Status::error("host: " + llvm::toString(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  if (!cpu.empty()) {
    const llvm::Target *target = nullptr;
    std::string error;
    target = llvm::TargetRegistry::lookupTarget(jtmb->getTargetTriple(), error);
    std::unique_ptr<llvm::MCSubtargetInfo> sti(
        target ? target->createMCSubtargetInfo(jtmb->getTargetTriple(), "", "") : nullptr);
    if (!sti || !sti->isCPUStringValid(cpu))
      return Status::error(fmt::format("host: unknown CPU '{}' for {}", cpu, jtmb->getTargetTriple().str()));
    jtmb->setCPU(cpu);
    jtmb->getFeatures() = llvm::SubtargetFeatures();
  }
  auto tm = jtmb->createTargetMachine();
  if (!tm)
    return Status::error("host: " + llvm::toString(tm.takeError()));
  return std::move(*tm);
}

std::string printOp(mlir::Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os);
  return s;
}

// Emits and lowers to the LLVM dialect in `ctx`.
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> lower(mlir::MLIRContext &ctx, const dsl::Kernel &k,
                                                  HostCompileStats *stats, bool stopAfterEmit,
                                                  std::string *irAfterEachPass) {
  auto t0 = Clock::now();
  auto module = emitHostModule(ctx, k);
  if (!module.ok())
    return module.status();
  if (stats)
    stats->emitMs = msSince(t0);
  if (stopAfterEmit)
    return std::move(module).value();
  auto t1 = Clock::now();
  std::unique_ptr<Target> target = makeHostTarget();
  M3IDX_RETURN_IF_ERROR(runPipeline(module->get(), *target, irAfterEachPass));
  if (stats)
    stats->pipelineMs = msSince(t1);
  return std::move(module).value();
}

} // namespace

int optLevel() {
  int level = std::atoi(env::get("M3IDX_OPT_LEVEL").c_str());
  return std::clamp(level, 0, 3);
}

llvm::CodeGenOptLevel codeGenLevel(int level) {
  switch (level) {
  case 0: return llvm::CodeGenOptLevel::None;
  case 1: return llvm::CodeGenOptLevel::Less;
  case 2: return llvm::CodeGenOptLevel::Default;
  default: return llvm::CodeGenOptLevel::Aggressive;
  }
}

std::string hostToolchainFingerprint() {
  return fmt::format("m3idx {} (build {}); LLVM {}", M3IDX_VERSION, M3IDX_BUILD_ID,
                     LLVM_VERSION_STRING);
}

StatusOr<HostObject> compileHostObject(const dsl::Kernel &k, HostCompileStats *stats, const std::string &cpu) {
  if (env::flag("M3IDX_DISABLE_COMPILER"))
    return Status::error(fmt::format("kernel @{}: the compiler is disabled "
                                     "(M3IDX_DISABLE_COMPILER=1)",
                                     k.name));
  std::unique_ptr<mlir::MLIRContext> ctx = makeContext();
  auto module = lower(*ctx, k, stats, false, nullptr);
  if (!module.ok())
    return module.status();
  auto t0 = Clock::now();
  auto tm = hostMachine(cpu);
  if (!tm.ok())
    return tm.status();
  auto codegenTm = hostMachine(cpu); // the engine takes its own
  if (!codegenTm.ok())
    return codegenTm.status();
  const int level = optLevel();
  // ExecutionEngineOptions::transformer is a function_ref: the function must outlive create()
  // (a temporary here was a stack-use-after-scope, found by the M3IDX_SANITIZE build).
  const std::function<llvm::Error(llvm::Module *)> transformer =
      mlir::makeOptimizingTransformer(level, 0, tm->get());
  mlir::ExecutionEngineOptions options;
  options.transformer = transformer;
  options.jitCodeGenOptLevel = codeGenLevel(level);
  options.enableObjectDump = true; // keep the object: it is what caches and bundles store
  auto engine = mlir::ExecutionEngine::create(module->get(), options, std::move(*codegenTm));
  if (!engine)
    return Status::error(fmt::format("kernel @{}: JIT failed: {}", k.name,
                                     llvm::toString(engine.takeError())));
  HostObject object;
  object.symbol = "_mlir__mlir_ciface_" + k.name; // ExecutionEngine's packed wrapper
  auto fn = (*engine)->lookupPacked("_mlir_ciface_" + k.name); // materializes the object
  if (!fn)
    return Status::error(fmt::format("kernel @{}: entry point missing: {}", k.name,
                                     llvm::toString(fn.takeError())));
  llvm::SmallString<128> path;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("m3idx-kernel", "o", path))
    return Status::error(fmt::format("kernel @{}: no temporary file for the object: {}", k.name,
                                     ec.message()));
  (*engine)->dumpToObjectFile(path);
  auto buffer = llvm::MemoryBuffer::getFile(path);
  llvm::sys::fs::remove(path);
  if (!buffer || (*buffer)->getBufferSize() == 0)
    return Status::error(fmt::format("kernel @{}: the JIT produced no object", k.name));
  object.bytes.assign((*buffer)->getBufferStart(), (*buffer)->getBufferEnd());
  if (stats)
    stats->jitMs = msSince(t0);
  return object;
}

namespace {

// One JIT for the process; each loaded object gets its own JITDylib so the same kernel name can
// be loaded for several configs or keys.
class ObjectLinker {
public:
  static StatusOr<ObjectLinker *> get() {
    static std::mutex mutex;
    static std::unique_ptr<ObjectLinker> instance;
    static std::string error;
    std::lock_guard<std::mutex> lock(mutex);
    if (!instance && error.empty()) {
      initNativeTarget();
      auto jit = llvm::orc::LLJITBuilder().create();
      if (!jit)
        error = llvm::toString(jit.takeError());
      else
        instance.reset(new ObjectLinker(std::move(*jit)));
    }
    if (!instance)
      return Status::error("host: cannot create the JIT linker: " + error);
    return instance.get();
  }

  StatusOr<void (*)(void **)> load(const HostObject &object) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto jd = jit_->createJITDylib(fmt::format("m3idx_kernel_{}", next_++));
    if (!jd)
      return Status::error("host: " + llvm::toString(jd.takeError()));
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        jit_->getDataLayout().getGlobalPrefix());
    if (!gen)
      return Status::error("host: " + llvm::toString(gen.takeError()));
    jd->addGenerator(std::move(*gen));
    llvm::StringRef bytes(reinterpret_cast<const char *>(object.bytes.data()), object.bytes.size());
    if (llvm::Error e = jit_->addObjectFile(
            *jd, llvm::MemoryBuffer::getMemBufferCopy(bytes, object.symbol)))
      return Status::error(fmt::format("host: cannot link the kernel object ({}): {}", object.symbol,
                                       llvm::toString(std::move(e))));
    auto addr = jit_->lookup(*jd, object.symbol);
    if (!addr)
      return Status::error(fmt::format("host: kernel object lacks {}: {}", object.symbol,
                                       llvm::toString(addr.takeError())));
    return addr->toPtr<void (*)(void **)>();
  }

private:
  explicit ObjectLinker(std::unique_ptr<llvm::orc::LLJIT> jit) : jit_(std::move(jit)) {}
  std::mutex mutex_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  uint64_t next_ = 0;
};

} // namespace

StatusOr<std::unique_ptr<HostKernel>> loadHostKernel(const HostObject &object) {
  auto linker = ObjectLinker::get();
  if (!linker.ok())
    return linker.status();
  auto fn = (*linker)->load(object);
  if (!fn.ok())
    return fn.status();
  return std::make_unique<HostKernel>(*fn);
}

StatusOr<std::unique_ptr<HostKernel>> compileHostKernel(const dsl::Kernel &k,
                                                        HostCompileStats *stats) {
  auto object = compileHostObject(k, stats);
  if (!object.ok())
    return object.status();
  return loadHostKernel(*object);
}

StatusOr<std::string> hostStage(const dsl::Kernel &k, Stage stage, std::string *irAfterEachPass) {
  if (stage == Stage::Dsl)
    return k.print();
  std::unique_ptr<mlir::MLIRContext> ctx = makeContext();
  auto module = lower(*ctx, k, nullptr, stage == Stage::Mlir, irAfterEachPass);
  if (!module.ok())
    return module.status();
  if (stage == Stage::Mlir || stage == Stage::Lowered)
    return printOp(module->get());
  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(module->get(), llvmCtx);
  if (!llvmModule)
    return Status::error(fmt::format("kernel @{}: translation to LLVM IR failed", k.name));
  auto tm = hostMachine();
  if (!tm.ok())
    return tm.status();
  llvmModule->setDataLayout((*tm)->createDataLayout());
  llvmModule->setTargetTriple((*tm)->getTargetTriple());
  if (llvm::Error e = mlir::makeOptimizingTransformer(optLevel(), 0, tm->get())(llvmModule.get()))
    return Status::error("host: LLVM optimization failed: " + llvm::toString(std::move(e)));
  std::string out;
  llvm::raw_string_ostream os(out);
  if (stage == Stage::Llvm) {
    llvmModule->print(os, nullptr);
    return out;
  }
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream asmStream(buffer);
  llvm::legacy::PassManager pm;
  if ((*tm)->addPassesToEmitFile(pm, asmStream, nullptr, llvm::CodeGenFileType::AssemblyFile))
    return Status::error("host: the target machine cannot emit assembly");
  pm.run(*llvmModule);
  return std::string(buffer.str());
}

} // namespace m3idx::lowering
