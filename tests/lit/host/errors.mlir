// What the host form does not take is an error naming it (lowering/host/HostOpPatterns.cpp).
// RUN: not m3idx-opt %s --m3idx-to-host --split-input-file 2>&1 | FileCheck %s

// CHECK: host: reduce.max.groups of 128 lanes per group (at most 64)
func.func @wide_groups(%buf: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %t = m3idx.load_tile %buf[%c0] : memref<?xf32> -> tensor<256xf32>
  %g = m3idx.reduce_max_groups %t, 2 : tensor<256xf32> -> tensor<2xf32>
  m3idx.store_tile %g, %out[%c0] : tensor<2xf32>, memref<?xf32>
  return
}

// -----

// CHECK: host: wide f4E2M1FN tiles are not stored
func.func @wide_f4(%buf: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %t = m3idx.load_tile %buf[%c0] : memref<?xf32> -> tensor<128xf32>
  %n = arith.truncf %t : tensor<128xf32> to tensor<128xf4E2M1FN>
  return
}

// -----

// CHECK: error: failed to legalize operation 'arith.constant'
func.func @tile_constant(%out: memref<?xi64>) {
  %c0 = arith.constant 0 : i64
  %t = arith.constant dense<1> : tensor<8xi64>
  m3idx.store_tile %t, %out[%c0] : tensor<8xi64>, memref<?xi64>
  return
}
