// RUN: rm -rf %t && deltac %s --target=sm_100a -o %t --name=lib > /dev/null
// RUN: grep -oE "ldmatrix[.a-z0-9]*|mma.sync" %t/kernels/kv_k128_v128_prefill_recur_v16.sm_100a.ptx | sed -E 's/ldmatrix.sync.aligned.m8n8.(x[124])(.trans)?.shared.b16/ldmatrix.\1\2/' | uniq -c | FileCheck %s

// recur's products load their fragments ahead of their mma.sync
// (PrefillRecurState.cpp, PrefillRecur.cpp), so in the PTX a product's
// ldmatrix come as runs ahead of its mma.sync, not one per mma.sync. The
// runs of ldmatrix and mma.sync at V tile 16 (the mma.sync form: sm_100a,
// sm_80), in order: the state warp
// (W S, then Kd^T V'), then the output warps (Qg S, then P V').

// State warp: the U tile (4 x4.trans) before the product, off the chain;
// W^T two k steps ahead (2 x 4 ldmatrix.x4, each two 16x8 tiles), then one
// step's loads per step's 8 mma.sync (A comes from the accumulators).
// CHECK:      {{^ *}}4 ldmatrix.x4.trans
// CHECK-NEXT: {{^ *}}8 ldmatrix.x4
// CHECK-NEXT: {{^ *}}8 mma.sync
// CHECK-NEXT: {{^ *}}4 ldmatrix.x4
// CHECK-NEXT: {{^ *}}8 mma.sync
// CHECK-NEXT: {{^ *}}4 ldmatrix.x4
// CHECK-NEXT: {{^ *}}8 mma.sync
// CHECK-NEXT: {{^ *}}4 ldmatrix.x4
// CHECK-NEXT: {{^ *}}8 mma.sync
// CHECK-NEXT: {{^ *}}4 ldmatrix.x4
// CHECK-NEXT: {{^ *}}8 mma.sync
// CHECK-NEXT: {{^ *}}4 ldmatrix.x4
// CHECK-NEXT: {{^ *}}8 mma.sync
// CHECK-NEXT: {{^ *}}4 ldmatrix.x4
// CHECK-NEXT: {{^ *}}16 mma.sync
// Kd (rows are the reduction index: .trans): one k step (16 tiles) ahead.
// CHECK-NEXT: {{^ *}}8 ldmatrix.x4.trans
// CHECK-NEXT: {{^ *}}16 mma.sync
// CHECK-NEXT: {{^ *}}8 ldmatrix.x4.trans
// CHECK-NEXT: {{^ *}}16 mma.sync
// CHECK-NEXT: {{^ *}}8 ldmatrix.x4.trans
// CHECK-NEXT: {{^ *}}16 mma.sync
// CHECK-NEXT: {{^ *}}8 ldmatrix.x4.trans
// CHECK-NEXT: {{^ *}}16 mma.sync
// Output warps (2 x 2 tiles each, up to 64 registers ahead): Qg S loads
// five of its eight k steps (A x4 and B x2 per tile row / column) first.
// CHECK-NEXT: {{^ *}}2 ldmatrix.x4
// CHECK-NEXT: {{^ *}}2 ldmatrix.x2
// CHECK-NEXT: {{^ *}}2 ldmatrix.x4
// CHECK-NEXT: {{^ *}}2 ldmatrix.x2
// CHECK-NEXT: {{^ *}}2 ldmatrix.x4
// CHECK-NEXT: {{^ *}}2 ldmatrix.x2
// CHECK-NEXT: {{^ *}}2 ldmatrix.x4
// CHECK-NEXT: {{^ *}}2 ldmatrix.x2
// CHECK-NEXT: {{^ *}}2 ldmatrix.x4
// CHECK-NEXT: {{^ *}}2 ldmatrix.x2
// CHECK-NEXT: {{^ *}}4 mma.sync

delta.spec @kv rule = gated dims = [128x128] io = bf16 state = f32
    layout = kv gate = log beta = given l2norm chunk = 64 entries = [prefill]
