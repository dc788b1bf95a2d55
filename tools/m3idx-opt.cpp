// m3idx-opt: mlir-opt with m3idx's passes registered, so lit tests can run them on .mlir files
// (`// RUN: m3idx-opt %s --m3idx-expand-small-floats | FileCheck %s`).
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "lowering/transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  m3idx::lowering::registerPasses();
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "m3idx optimizer driver\n", registry));
}
