// RUN: m3idx-opt %s --m3idx-expand-small-floats | FileCheck %s

// E4M3 bytes viewed as f8E4M3FN and widened: the pass reads the bytes directly (no f8 value
// remains), decodes normals by shifting into the f32 exponent and subnormals as m * 2^-9.
// CHECK-LABEL: func.func @extf_e4m3
// CHECK-SAME: (%[[ARG:.*]]: vector<8xi8>)
// CHECK-NOT: f8E4M3FN
// CHECK-DAG: arith.constant dense<1006632960> : vector<8xi32>
// CHECK-DAG: arith.constant dense<0.001953125> : vector<8xf32>
// CHECK-DAG: arith.constant dense<2143289344> : vector<8xi32>
// CHECK: arith.extui %[[ARG]] : vector<8xi8> to vector<8xi32>
// CHECK: arith.sitofp
// CHECK: return {{.*}} : vector<8xf32>
func.func @extf_e4m3(%bytes: vector<8xi8>) -> vector<8xf32> {
  %f8 = arith.bitcast %bytes : vector<8xi8> to vector<8xf8E4M3FN>
  %f = arith.extf %f8 : vector<8xf8E4M3FN> to vector<8xf32>
  return %f : vector<8xf32>
}

// Nibbles truncated from bytes: the pass masks the byte instead of keeping an i4 vector.
// CHECK-LABEL: func.func @extf_e2m1
// CHECK-NOT: f4E2M1FN
// CHECK-NOT: i4
// CHECK: arith.extui %{{.*}} : vector<4xi8> to vector<4xi32>
// CHECK: arith.andi %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK: return {{.*}} : vector<4xf32>
func.func @extf_e2m1(%bytes: vector<4xi8>) -> vector<4xf32> {
  %n = arith.trunci %bytes : vector<4xi8> to vector<4xi4>
  %f4 = arith.bitcast %n : vector<4xi4> to vector<4xf4E2M1FN>
  %f = arith.extf %f4 : vector<4xf4E2M1FN> to vector<4xf32>
  return %f : vector<4xf32>
}

// f32 -> E4M3 with round to nearest even: the normal path rounds at mantissa bit 20, the
// subnormal path adds 2^14 (16384.0) so the FPU rounds to a multiple of 2^-9; 448 (0x43E00000)
// saturates to 0x7E and NaN (> 0x7F800000) gives 0x7F.
// CHECK-LABEL: func.func @truncf_e4m3
// CHECK-NOT: arith.truncf
// CHECK-DAG: arith.constant 524287 : i32
// CHECK-DAG: arith.constant 1.638400e+04 : f32
// CHECK-DAG: arith.constant 1138753536 : i32
// CHECK-DAG: arith.constant 2139095040 : i32
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
// CHECK: arith.trunci %{{.*}} : i32 to i8
// CHECK: return %{{.*}} : i8
func.func @truncf_e4m3(%x: f32) -> i8 {
  %f8 = arith.truncf %x : f32 to f8E4M3FN
  %b = arith.bitcast %f8 : f8E4M3FN to i8
  return %b : i8
}

// A truncf feeding an extf (the NVFP4 decode then the dot) leaves no small-float value between.
// CHECK-LABEL: func.func @round_trip
// CHECK-NOT: f8E4M3FN
// CHECK: return
func.func @round_trip(%x: vector<16xf32>) -> vector<16xf32> {
  %f8 = arith.truncf %x : vector<16xf32> to vector<16xf8E4M3FN>
  %y = arith.extf %f8 : vector<16xf8E4M3FN> to vector<16xf32>
  return %y : vector<16xf32>
}
