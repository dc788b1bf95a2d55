// RUN: m3idx-opt %s -split-input-file -verify-diagnostics
// The tile dialect's verifiers state the DSL builder's shape rules.

func.func @extract_lane(%t: tensor<4xf32>) {
  // expected-error @+1 {{lane 4 out of [0, 4)}}
  %e = m3idx.extract %t[4] : tensor<4xf32> -> f32
  return
}

// -----

func.func @extract_negative_lane(%t: tensor<4xf32>) {
  // expected-error @+1 {{lane -1 out of [0, 4)}}
  %e = m3idx.extract %t[-1] : tensor<4xf32> -> f32
  return
}

// -----

func.func @extract_type(%t: tensor<4xf32>) {
  // expected-error @+1 {{is not the element type of}}
  %e = m3idx.extract %t[0] : tensor<4xf32> -> i64
  return
}

// -----

func.func @shuffle_lane(%t: tensor<2xf32>) {
  // expected-error @+1 {{lane 4 out of [0, 4)}}
  %s = m3idx.shuffle %t, %t [4, 0] : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

func.func @groups(%t: tensor<6xf32>) {
  // expected-error @+1 {{groups dividing}}
  %g = m3idx.reduce_max_groups %t, 4 : tensor<6xf32> -> tensor<4xf32>
  return
}

// -----

func.func @fold(%t: tensor<6xf32>) {
  // expected-error @+1 {{a power of two pairs}}
  %f = m3idx.fold_max %t, 3 : tensor<6xf32> -> tensor<3xf32>
  return
}

// -----

func.func @decode(%p: tensor<64xi8>, %s: tensor<16xi8>) {
  // expected-error @+1 {{needs packed tile<8k x i8>}}
  %k = m3idx.decode_nvfp4 %p, %s : tensor<64xi8>, tensor<16xi8> -> tensor<128xf8E4M3FN>
  return
}

// -----

func.func @dot_tiles_rows(%a: tensor<100xf32>) {
  // expected-error @+1 {{needs whole rows of 128 lanes}}
  %d = m3idx.dot_tiles %a, %a, 128 : tensor<100xf32>, tensor<100xf32> -> tensor<1xf32>
  return
}

// -----

func.func @dot_tiles_types(%a: tensor<128xf32>, %b: tensor<128xf8E4M3FN>) {
  // expected-error @+1 {{needs two f32 or two f8E4M3FN tiles}}
  %d = m3idx.dot_tiles %a, %b, 128 : tensor<128xf32>, tensor<128xf8E4M3FN> -> tensor<1xf32>
  return
}

// -----

func.func @store_type(%v: tensor<4xf32>, %b: memref<?xi32>, %o: i64) {
  // expected-error @+1 {{of different element types}}
  m3idx.store_tile %v, %b[%o] : tensor<4xf32>, memref<?xi32>
  return
}

// -----

func.func @gather_lanes(%b: memref<?xf32>, %o: tensor<2xi64>, %m: tensor<4xi1>) {
  // expected-error @+1 {{offsets and mask must have the result's 4 lanes}}
  %g = m3idx.load_gather %b[%o], %m : memref<?xf32>, tensor<2xi64>, tensor<4xi1> -> tensor<4xf32>
  return
}

// -----

func.func @rows_lanes(%b: memref<?xf32>, %s: tensor<2xi64>, %c: tensor<4xi64>) {
  // expected-error @+1 {{counts must have the starts' 2 lanes and the result a multiple of them}}
  %g = m3idx.load_rows %b[%s], %c : memref<?xf32>, tensor<2xi64>, tensor<4xi64> -> tensor<8xf32>
  return
}

// -----

func.func @scatter_lanes(%v: tensor<4xf32>, %b: memref<?xf32>, %o: tensor<2xi64>, %m: tensor<4xi1>) {
  // expected-error @+1 {{offsets and mask must have the value's 4 lanes}}
  m3idx.store_scatter %v, %b[%o], %m : tensor<4xf32>, memref<?xf32>, tensor<2xi64>, tensor<4xi1>
  return
}

// -----

func.func @align(%b: memref<?xi8>, %o: i64) {
  // expected-error @+1 {{alignment must be a power of two up to 16, got 12}}
  %t = m3idx.load_tile %b[%o] {align = 12 : i32} : memref<?xi8> -> tensor<16xi8>
  return
}

// -----

func.func @dynamic(%t: tensor<?xf32>) {
  // expected-error @+1 {{static, positive lane count}}
  %r = m3idx.reduce_max %t : tensor<?xf32> -> f32
  return
}

// -----

func.func @pack(%s: tensor<4xf32>, %b: tensor<2xi64>) {
  // expected-error @+1 {{needs scores, blocks and keys of one shape}}
  %k = m3idx.pack_score_key %s, %b : tensor<4xf32>, tensor<2xi64> -> tensor<4xi64>
  return
}

// -----

func.func @convert_to_itself(%t: tensor<64xf32, #m3idx.layout<mma_acc>>) {
  // expected-error @+1 {{converts mma_acc to itself}}
  %c = m3idx.convert_layout %t : tensor<64xf32, #m3idx.layout<mma_acc>> -> tensor<64xf32, #m3idx.layout<mma_acc>>
  return
}

// -----

func.func @convert_shape(%t: tensor<64xf32, #m3idx.layout<mma_acc>>) {
  // expected-error @+1 {{needs a result of the tile's lanes and element type}}
  %c = m3idx.convert_layout %t : tensor<64xf32, #m3idx.layout<mma_acc>> -> tensor<32xf32, #m3idx.layout<blocked>>
  return
}

// -----

// expected-error @+2 {{to be one of: blocked, mma_rows, mma_acc, wgmma_acc, wgmma_acc_folded}}
// expected-error @+1 {{failed to parse Tile_LayoutAttr parameter 'value'}}
func.func @no_such_layout(%t: tensor<64xf32, #m3idx.layout<swizzled>>) {
  return
}

// -----

func.func @stage_outside_a_loop(%t: tensor<64xf32>) {
  // expected-error @+1 {{must be in an scf.for's body}}
  %s = m3idx.stage %t {stages = 2 : i64} : tensor<64xf32> -> tensor<64xf32>
  return
}

// -----

func.func @stage_types(%t: tensor<64xf32>, %n: i64) {
  scf.for %i = %n to %n step %n : i64 {
    // expected-error @+1 {{result types must be the values' types}}
    %s = m3idx.stage %t {stages = 2 : i64} : tensor<64xf32> -> tensor<32xf32>
  }
  return
}

// -----

func.func @stage_count(%t: tensor<64xf32>, %n: i64) {
  scf.for %i = %n to %n step %n : i64 {
    // expected-error @+1 {{needs 2 to 8 stages, got 9}}
    %s = m3idx.stage %t {stages = 9 : i64} : tensor<64xf32> -> tensor<64xf32>
  }
  return
}
