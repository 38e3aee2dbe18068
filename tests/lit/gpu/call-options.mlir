// RUN: deltac-opt %s --delta-expand-spec --delta-lower-decode-to-gpu | FileCheck %s --check-prefix=DECODE
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s --check-prefix=PREFILL

// `gate = call beta = call l2norm = call`: one kernel set reads the call's
// choices, the bits of deltac_abi::CallOptions (256 l2norm, 512 sigmoid
// beta, 1024 twice the sigmoid, 2048 raw gate, 4096 raw a in the io
// dtype), from decode's `flags` and prefill's `options`.

module attributes {delta.targets = ["sm_90a"]} {
delta.spec @c rule = gated dims = [64x64] io = bf16 state = f32
    layout = kv gate = call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 2
}

// Decode: g is read as f32 or, with 4096, as the io dtype (one load of
// either width: the index doubled for f32); null with kNullGate (128): the
// zeros.
// DECODE: gpu.func @c_k64_v64_decode(
// DECODE: %[[NULL:.*]] = arith.constant 128 : i32
// DECODE-NEXT: %[[NB:.*]] = arith.andi %[[FLAGS:arg22]], %[[NULL]] : i32
// DECODE-NEXT: %[[NOG:.*]] = arith.cmpi ne, %[[NB]]
// DECODE-NEXT: %[[Z:.*]] = llvm.mlir.addressof @c_k64_v64_decode_zeros
// DECODE-NEXT: arith.select %[[NOG]], %[[Z]], %{{.*}} : !llvm.ptr<1>
// DECODE: %[[H:.*]] = arith.constant 4096 : i32
// DECODE-NEXT: arith.andi %[[FLAGS]], %[[H]] : i32
// The decay: the raw form's log decay where 2048 is set, else g.
// DECODE: %[[RAWBIT:.*]] = arith.constant 2048 : i32
// DECODE-NEXT: %[[RB:.*]] = arith.andi %[[FLAGS]], %[[RAWBIT]] : i32
// DECODE-NEXT: %[[RAW:.*]] = arith.cmpi ne, %[[RB]]
// DECODE-NEXT: %[[LOGD:.*]] = arith.select %[[RAW]], %{{.*}}, %{{.*}} : f32
// DECODE: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"

// Decode: the norm's root takes sum + 1e-6 where the call's bit is set,
// else 1 (1 / sqrt(1) = 1 exactly); the sigmoid of the beta logits, times
// 2 with 1024, in a branch on 512 (a select made ptxas spill).
// DECODE: gpu.func @c_k64_v64_decode_small(
// DECODE-SAME: %[[FLAGS:arg22]]: i32
// DECODE: %[[ON:.*]] = arith.constant 256 : i32
// DECODE-NEXT: %[[AND:.*]] = arith.andi %[[FLAGS]], %[[ON]] : i32
// DECODE-NEXT: %[[SET:.*]] = arith.cmpi ne, %[[AND]]
// DECODE-NEXT: %[[X:.*]] = arith.select %[[SET]], %{{.*}}, %{{.*}} : f32
// DECODE-NEXT: llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"(%[[X]])
// DECODE: arith.constant 512 : i32
// DECODE-NEXT: %[[SIG:.*]] = arith.andi %[[FLAGS]],
// DECODE-NEXT: %[[SIGSET:.*]] = arith.cmpi ne, %[[SIG]]
// DECODE-NEXT: scf.if %[[SIGSET]] -> (f32) {
// DECODE: arith.constant 1024 : i32
// DECODE: arith.divf
// DECODE: } else {
// DECODE-NEXT: scf.yield

// Prefill: chunks (sm_90a's warpgroup form) takes the options last: g is
// read as f32 or, with 4096, as the io dtype, the raw form's log decay
// taken where 2048 is set; beta is the sigmoid (times 2 with 1024) where
// 512 is; the norms' product on the tensor cores runs either way and 256
// picks each row's scale (1 without).
// PREFILL: gpu.func @c_k64_v64_prefill_chunks(
// PREFILL-SAME: %[[OPT:[[:alnum:]_]+]]: i32) kernel
// PREFILL: arith.andi %[[OPT]], %c4096_i32{{[_0-9]*}} : i32
// PREFILL: arith.andi %[[OPT]], %c2048_i32{{[_0-9]*}} : i32
// PREFILL: arith.andi %[[OPT]], %c1024_i32{{[_0-9]*}} : i32
// PREFILL: arith.andi %[[OPT]], %c512_i32{{[_0-9]*}} : i32
// PREFILL: wgmma.fence
// PREFILL: %[[BIT:.*]] = arith.andi %[[OPT]], %c256_i32{{[_0-9]*}} : i32
// PREFILL-NEXT: %[[SET:.*]] = arith.cmpi ne, %[[BIT]]
// PREFILL-NEXT: arith.select %[[SET]], %{{.*}}, %{{.*}} : f32
// PREFILL: gpu.func @c_k64_v64_prefill_recur(
