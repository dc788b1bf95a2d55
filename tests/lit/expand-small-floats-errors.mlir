// RUN: not m3idx-opt %s --m3idx-expand-small-floats 2>&1 | FileCheck %s

// A conversion the host cannot lower must fail the pass, not reach LLVM.
// CHECK: error: small-float value left after m3idx-expand-small-floats
func.func @to_e2m1(%x: f32) -> f4E2M1FN {
  %y = arith.truncf %x : f32 to f4E2M1FN
  return %y : f4E2M1FN
}
