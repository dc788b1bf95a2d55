#include "lowering/host/HostCompiler.h"

#include <chrono>

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include "lowering/MlirEmitter.h"
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

StatusOr<std::unique_ptr<llvm::TargetMachine>> hostMachine() {
  initNativeTarget();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return Status::error("host: " + llvm::toString(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
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

HostKernel::HostKernel(std::unique_ptr<mlir::ExecutionEngine> engine, void (*fn)(void **))
    : engine_(std::move(engine)), fn_(fn) {}
HostKernel::~HostKernel() = default;

StatusOr<std::unique_ptr<HostKernel>> compileHostKernel(const dsl::Kernel &k,
                                                        HostCompileStats *stats) {
  std::unique_ptr<mlir::MLIRContext> ctx = makeContext();
  auto module = lower(*ctx, k, stats, false, nullptr);
  if (!module.ok())
    return module.status();
  auto t0 = Clock::now();
  auto tm = hostMachine();
  if (!tm.ok())
    return tm.status();
  mlir::ExecutionEngineOptions options;
  options.transformer = mlir::makeOptimizingTransformer(3, 0, tm->get());
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  auto engine = mlir::ExecutionEngine::create(module->get(), options);
  if (!engine)
    return Status::error(fmt::format("kernel @{}: JIT failed: {}", k.name,
                                     llvm::toString(engine.takeError())));
  auto fn = (*engine)->lookupPacked("_mlir_ciface_" + k.name);
  if (!fn)
    return Status::error(fmt::format("kernel @{}: entry point missing: {}", k.name,
                                     llvm::toString(fn.takeError())));
  if (stats)
    stats->jitMs = msSince(t0);
  return std::make_unique<HostKernel>(std::move(*engine), *fn);
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
  if (llvm::Error e = mlir::makeOptimizingTransformer(3, 0, tm->get())(llvmModule.get()))
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
