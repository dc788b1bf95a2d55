// m3idx-opt: mlir-opt with m3idx's passes and tile dialect registered, so lit tests can run them
// on .mlir files (`// RUN: m3idx-opt %s --m3idx-expand-small-floats | FileCheck %s`).
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVM/ROCDL/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "lowering/GpuPatterns.h"
#include "lowering/host/HostPatterns.h"
#include "lowering/nvvm/Sm90Layouts.h"
#include "lowering/transforms/Passes.h"
#include "tile/TileDialect.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  m3idx::lowering::registerPasses();
  m3idx::lowering::registerAssignSm90LayoutsPass();
  m3idx::lowering::registerHostConversionPass();
  m3idx::lowering::registerGpuConversionPasses();
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  m3idx::tile::registerTileDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::ROCDL::registerROCDLTargetInterfaceExternalModels(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "m3idx optimizer driver\n", registry));
}
