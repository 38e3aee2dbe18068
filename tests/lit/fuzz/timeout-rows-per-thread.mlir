// decode-tuning=rows-per-thread=9223372036854775807 dot-partials=-3
// RUN: not deltac %s --target=sm_90a --decode-tuning="rows-per-thread=9223372036854775807 dot-partials=-3" 2>&1 | FileCheck %s

// rows-per-thread = 2^63 - 1 made the decode tiling search count down from
// it (a hang); negative dot-partials were clamped to 1 without a word.
// Both are range errors now (tools/deltac-options.mlir has the rest). The
// first line is deltac-spec-fuzzer's header: as a seed, this file drives
// the fuzzer's option path into the same check.
// CHECK: error: delta-lower-decode-to-gpu option rows-per-thread = 9223372036854775807 is out of range; accepted: 0 to 256
delta.spec @g rule = gated dims = [64x64] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 1
