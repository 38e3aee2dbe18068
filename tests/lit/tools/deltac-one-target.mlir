// RUN: rm -rf %t && deltac %deltac_src/examples/qwen3_next_gdn.mlir --target=sm_90a -o %t > /dev/null
// RUN: FileCheck %s < %t/qwen3_next_gdn.cpp
// RUN: %cxx -std=c++17 -fsyntax-only -I%t %t/qwen3_next_gdn.cpp

// A library for sm_90a alone holds the wgmma forms only, so no other
// target's launch values differ from theirs; its variant table still names
// sm_90a as the target whose code takes the overlapped launch (queue, and
// the shared launch's recur) and the raw q/k form, with its launch values
// (the wrapper did not compile when those fields were left out).
// CHECK: v.recur = &qwen3_next_k128_v128_prefill_recur_kernel;
// CHECK-NEXT: v.altTarget = "sm_90a";
// CHECK-NEXT: v.recurAltThreads = 256;
// CHECK-NEXT: v.smemRecurAlt = {{[0-9]+}};
// CHECK-NEXT: v.smemRecurAltStage = {{[0-9]+}};
// CHECK-NEXT: v.chunksAltThreads = 256;
// CHECK-NEXT: v.smemChunksAlt = {{[0-9]+}};
// CHECK-NEXT: v.overlapBlocksPerSM = 1;
// CHECK-NEXT: v.queue = &qwen3_next_k128_v128_prefill_queue_kernel;
// CHECK-NEXT: v.smemQueue = {{[0-9]+}};
// CHECK-NEXT: v.chunksRaw = &qwen3_next_k128_v128_prefill_chunks_raw_kernel;
// CHECK-NEXT: v.recurShared = &qwen3_next_k128_v128_prefill_recur_shared_kernel;
