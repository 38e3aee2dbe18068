// RUN: rm -rf %t && deltac %s --target=sm_90a -o %t --name=lib > /dev/null
// RUN: grep -oE "ldmatrix|mma.sync" %t/kernels/kv_k128_v128_prefill_recur_v16.sm_90a.ptx | uniq -c | FileCheck %s
// RUN: grep -oE "ldmatrix|mma.sync" %t/kernels/kv_k128_v128_prefill_recur.sm_90a.ptx | uniq -c | FileCheck %s --check-prefix=V32

// recur's products load their fragments ahead of their mma.sync (up to 64
// registers: PrefillRecur.cpp), so in the PTX a product's ldmatrix come as
// one run before its mma.sync, not three per two mma.sync. The runs of
// ldmatrix and mma.sync, in order: state warps (W S, then Kd^T V'), output
// warps (Q S, then P V').

// V tile 16: every product's whole k range ahead. W S: 8 k steps of one
// A (x4) and two B (x2) fragments, 16 mma.sync (two tiles).
// CHECK:      {{^ *}}24 ldmatrix
// CHECK-NEXT: {{^ *}}16 mma.sync
// CHECK-NEXT: {{^ *}}16 ldmatrix
// CHECK-NEXT: {{^ *}}16 mma.sync
// CHECK-NEXT: {{^ *}}24 ldmatrix
// CHECK-NEXT: {{^ *}}16 mma.sync
// CHECK-NEXT: {{^ *}}12 ldmatrix
// CHECK-NEXT: {{^ *}}8 mma.sync

// V tile 32: W S (2 x 2 tiles per warp: two A and two B fragments, 12
// registers a k step) takes 5 of its 8 k steps ahead, then one step's
// loads after each step's products; Kd^T V' all of its 4.
// V32:      {{^ *}}20 ldmatrix
// V32-NEXT: {{^ *}}4 mma.sync
// V32-NEXT: {{^ *}}4 ldmatrix
// V32-NEXT: {{^ *}}4 mma.sync
// V32-NEXT: {{^ *}}4 ldmatrix
// V32-NEXT: {{^ *}}4 mma.sync
// V32-NEXT: {{^ *}}4 ldmatrix
// V32-NEXT: {{^ *}}20 mma.sync
// V32-NEXT: {{^ *}}24 ldmatrix
// V32-NEXT: {{^ *}}32 mma.sync

delta.spec @kv rule = gated dims = [128x128] io = bf16 state = f32
    layout = kv gate = log beta = given l2norm chunk = 64 entries = [prefill]
