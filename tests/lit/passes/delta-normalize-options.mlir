// RUN: deltac-opt %s --delta-normalize-options -split-input-file | FileCheck %s

// Raw gate, sigmoid beta and l2norm become explicit f32 preparation ops.
// CHECK-LABEL: func.func @raw
// CHECK-SAME: (%[[Q:.*]]: tensor<1x?x2x64xbf16>, %[[K:.*]]: tensor<1x?x2x64xbf16>, %[[V:.*]]: tensor<1x?x4x64xbf16>, %[[A:.*]]: tensor<1x?x4xbf16>, %[[B:.*]]: tensor<1x?x4xbf16>, %[[AL:.*]]: tensor<4xf32>, %[[DT:.*]]: tensor<4xf32>, %[[S0:.*]]: tensor<1x4x64x64xf32>, %[[SC:.*]]: f32)
// CHECK-DAG: %[[QN:.*]] = delta.l2norm %[[Q]] : tensor<1x?x2x64xbf16> -> tensor<1x?x2x64xf32>
// CHECK-DAG: %[[KN:.*]] = delta.l2norm %[[K]] : tensor<1x?x2x64xbf16> -> tensor<1x?x2x64xf32>
// CHECK-DAG: %[[G:.*]] = delta.gate_from_raw %[[A]], %[[AL]], %[[DT]] : tensor<1x?x4xbf16>, tensor<4xf32>, tensor<4xf32> -> tensor<1x?x4xf32>
// CHECK-DAG: %[[BETA:.*]] = delta.beta_sigmoid %[[B]] factor = 1.000000e+00 : tensor<1x?x4xbf16> -> tensor<1x?x4xf32>
// CHECK: delta.recurrence gated layout = vk gate = log beta = given q(%[[QN]] : {{.*}}) k(%[[KN]] : {{.*}}) v(%[[V]] : {{.*}}) g(%[[G]] : {{.*}}) beta(%[[BETA]] : {{.*}}) state(%[[S0]] : {{.*}}) scale(%[[SC]] : f32)
// CHECK-NOT: l2norm q(
func.func @raw(%q: tensor<1x?x2x64xbf16>, %k: tensor<1x?x2x64xbf16>,
               %v: tensor<1x?x4x64xbf16>, %a: tensor<1x?x4xbf16>,
               %b: tensor<1x?x4xbf16>, %al: tensor<4xf32>, %dt: tensor<4xf32>,
               %s0: tensor<1x4x64x64xf32>, %scale: f32)
    -> (tensor<1x?x4x64xbf16>, tensor<1x4x64x64xf32>) {
  %o, %s = delta.recurrence gated layout = vk gate = raw beta = sigmoid l2norm
      q(%q : tensor<1x?x2x64xbf16>) k(%k : tensor<1x?x2x64xbf16>)
      v(%v : tensor<1x?x4x64xbf16>) g(%a : tensor<1x?x4xbf16>)
      beta(%b : tensor<1x?x4xbf16>) a_log(%al : tensor<4xf32>)
      dt_bias(%dt : tensor<4xf32>) state(%s0 : tensor<1x4x64x64xf32>)
      scale(%scale : f32) -> tensor<1x?x4x64xbf16>, tensor<1x4x64x64xf32>
  return %o, %s : tensor<1x?x4x64xbf16>, tensor<1x4x64x64xf32>
}

// -----

// A linear gate becomes log(alpha); 2*sigmoid keeps its factor.
// CHECK-LABEL: func.func @linear
// CHECK: %[[G:.*]] = delta.gate_from_linear %{{.*}} : tensor<1x?x4xf32> -> tensor<1x?x4xf32>
// CHECK: %[[BETA:.*]] = delta.beta_sigmoid %{{.*}} factor = 2.000000e+00
// CHECK: delta.recurrence gated layout = kv gate = log beta = given
// CHECK-SAME: g(%[[G]] :
// CHECK-SAME: beta(%[[BETA]] :
func.func @linear(%q: tensor<1x?x4x64xbf16>, %k: tensor<1x?x4x64xbf16>,
                  %v: tensor<1x?x4x64xbf16>, %alpha: tensor<1x?x4xf32>,
                  %b: tensor<1x?x4xbf16>, %scale: f32) -> tensor<1x4x64x64xf32> {
  %o, %s = delta.recurrence gated layout = kv gate = linear beta = sigmoid2
      q(%q : tensor<1x?x4x64xbf16>) k(%k : tensor<1x?x4x64xbf16>)
      v(%v : tensor<1x?x4x64xbf16>) g(%alpha : tensor<1x?x4xf32>)
      beta(%b : tensor<1x?x4xbf16>) scale(%scale : f32)
      -> tensor<1x?x4x64xbf16>, tensor<1x4x64x64xf32>
  return %s : tensor<1x4x64x64xf32>
}

// -----

// KDA's per-channel raw gate becomes channel_log.
// CHECK-LABEL: func.func @kda
// CHECK: %[[G:.*]] = delta.gate_from_raw %{{.*}} : tensor<1x?x4x64xbf16>, tensor<4xf32>, tensor<256xf32> -> tensor<1x?x4x64xf32>
// CHECK: delta.recurrence kda layout = kv gate = channel_log beta = given
// CHECK-SAME: g(%[[G]] : tensor<1x?x4x64xf32>)
func.func @kda(%q: tensor<1x?x4x64xbf16>, %k: tensor<1x?x4x64xbf16>,
               %v: tensor<1x?x4x64xbf16>, %a: tensor<1x?x4x64xbf16>,
               %beta: tensor<1x?x4xbf16>, %al: tensor<4xf32>,
               %dt: tensor<256xf32>, %scale: f32) -> tensor<1x4x64x64xf32> {
  %o, %s = delta.recurrence kda layout = kv gate = channel_raw beta = given
      q(%q : tensor<1x?x4x64xbf16>) k(%k : tensor<1x?x4x64xbf16>)
      v(%v : tensor<1x?x4x64xbf16>) g(%a : tensor<1x?x4x64xbf16>)
      beta(%beta : tensor<1x?x4xbf16>) a_log(%al : tensor<4xf32>)
      dt_bias(%dt : tensor<256xf32>) scale(%scale : f32)
      -> tensor<1x?x4x64xbf16>, tensor<1x4x64x64xf32>
  return %s : tensor<1x4x64x64xf32>
}

// -----

// Canonical recurrences are left exactly as they are.
// CHECK-LABEL: func.func @canonical
// CHECK-NOT: delta.l2norm
// CHECK-NOT: delta.beta_sigmoid
// CHECK: delta.recurrence delta layout = kv gate = none beta = given q(%arg0
func.func @canonical(%q: tensor<1x?x4x64xbf16>, %k: tensor<1x?x4x64xbf16>,
                     %v: tensor<1x?x4x64xbf16>, %beta: tensor<1x?x4xbf16>,
                     %scale: f32) -> tensor<1x4x64x64xf32> {
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<1x?x4x64xbf16>) k(%k : tensor<1x?x4x64xbf16>)
      v(%v : tensor<1x?x4x64xbf16>) beta(%beta : tensor<1x?x4xbf16>)
      scale(%scale : f32) -> tensor<1x?x4x64xbf16>, tensor<1x4x64x64xf32>
  return %s : tensor<1x4x64x64xf32>
}

// -----

// `l2norm = call` and `beta = call`: scf.if on the call's options (bits of
// deltac_abi::CallOptions: 256 l2norm, 512 sigmoid, 1024 twice) with the
// preparation op in the then-branch and the plain f32 value in the else.
// CHECK-LABEL: func.func @by_call
// CHECK-SAME: %[[Q:[^:]*]]: tensor<1x?x2x64xbf16>
// CHECK-SAME: %[[B:[^:]*]]: tensor<1x?x2xbf16>
// CHECK-SAME: %[[OPT:[^:]*]]: i32
// CHECK: %[[M:.*]] = arith.constant 256 : i32
// CHECK: %[[AND:.*]] = arith.andi %[[OPT]], %[[M]] : i32
// CHECK: %[[ON:.*]] = arith.cmpi ne, %[[AND]]
// CHECK: %[[QN:.*]] = scf.if %[[ON]] -> (tensor<1x?x2x64xf32>) {
// CHECK-NEXT: %[[N:.*]] = delta.l2norm %[[Q]]
// CHECK-NEXT: scf.yield %[[N]]
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[E:.*]] = arith.extf %[[Q]] : tensor<1x?x2x64xbf16> to tensor<1x?x2x64xf32>
// CHECK-NEXT: scf.yield %[[E]]
// CHECK: arith.constant 512 : i32
// CHECK: %[[BETA:.*]] = scf.if
// CHECK: arith.constant 1024 : i32
// CHECK: scf.if
// CHECK: delta.beta_sigmoid %[[B]] factor = 2.000000e+00
// CHECK: } else {
// CHECK: delta.beta_sigmoid %[[B]] factor = 1.000000e+00
// CHECK: } else {
// CHECK-NEXT: arith.extf %[[B]] : tensor<1x?x2xbf16> to tensor<1x?x2xf32>
// CHECK: delta.recurrence gated layout = kv gate = log beta = given q(%[[QN]] :
// CHECK-SAME: beta(%[[BETA]] :
// CHECK-NOT: options(
func.func @by_call(%q: tensor<1x?x2x64xbf16>, %k: tensor<1x?x2x64xbf16>,
                   %v: tensor<1x?x2x64xbf16>, %g: tensor<1x?x2xf32>,
                   %b: tensor<1x?x2xbf16>, %scale: f32, %opt: i32)
    -> (tensor<1x?x2x64xbf16>, tensor<1x2x64x64xf32>) {
  %o, %s = delta.recurrence gated layout = kv gate = log beta = call l2norm = call
      q(%q : tensor<1x?x2x64xbf16>) k(%k : tensor<1x?x2x64xbf16>)
      v(%v : tensor<1x?x2x64xbf16>) g(%g : tensor<1x?x2xf32>)
      beta(%b : tensor<1x?x2xbf16>) scale(%scale : f32) options(%opt : i32)
      -> tensor<1x?x2x64xbf16>, tensor<1x2x64x64xf32>
  return %o, %s : tensor<1x?x2x64xbf16>, tensor<1x2x64x64xf32>
}

// -----

// `gate = call`: gate_from_raw where the call's 2048 (kCallGateRaw) is
// set, else g as given (f32 log decays).
// CHECK-LABEL: func.func @gate_by_call
// CHECK-SAME: %[[G:[^:]*]]: tensor<1x?x2xf32>
// CHECK-SAME: %[[AL:[^:]*]]: tensor<2xf32>, %[[DT:[^:]*]]: tensor<2xf32>
// CHECK-SAME: %[[OPT:[^:]*]]: i32
// CHECK: %[[M:.*]] = arith.constant 2048 : i32
// CHECK: %[[AND:.*]] = arith.andi %[[OPT]], %[[M]] : i32
// CHECK: %[[RAW:.*]] = arith.cmpi ne, %[[AND]]
// CHECK: %[[GATE:.*]] = scf.if %[[RAW]] -> (tensor<1x?x2xf32>) {
// CHECK-NEXT: %[[D:.*]] = delta.gate_from_raw %[[G]], %[[AL]], %[[DT]]
// CHECK-NEXT: scf.yield %[[D]]
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[G]]
// CHECK: delta.recurrence gated layout = kv gate = log beta = given
// CHECK-SAME: g(%[[GATE]] :
func.func @gate_by_call(%q: tensor<1x?x2x64xbf16>, %k: tensor<1x?x2x64xbf16>,
                        %v: tensor<1x?x2x64xbf16>, %g: tensor<1x?x2xf32>,
                        %b: tensor<1x?x2xbf16>, %al: tensor<2xf32>, %dt: tensor<2xf32>,
                        %scale: f32, %opt: i32)
    -> (tensor<1x?x2x64xbf16>, tensor<1x2x64x64xf32>) {
  %o, %s = delta.recurrence gated layout = kv gate = call beta = given
      q(%q : tensor<1x?x2x64xbf16>) k(%k : tensor<1x?x2x64xbf16>)
      v(%v : tensor<1x?x2x64xbf16>) g(%g : tensor<1x?x2xf32>)
      beta(%b : tensor<1x?x2xbf16>) a_log(%al : tensor<2xf32>)
      dt_bias(%dt : tensor<2xf32>) scale(%scale : f32) options(%opt : i32)
      -> tensor<1x?x2x64xbf16>, tensor<1x2x64x64xf32>
  return %o, %s : tensor<1x?x2x64xbf16>, tensor<1x2x64x64xf32>
}
