// RUN: deltac-opt %s --delta-attach-targets=targets=sm_90a,sm_80 | FileCheck %s
// RUN: not deltac-opt %s --delta-attach-targets=targets=sm_90a,sm_61 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not deltac-opt %s --delta-attach-targets=targets=sm_80,sm_80 2>&1 | FileCheck %s --check-prefix=TWICE

// CHECK: module attributes {delta.targets = ["sm_90a", "sm_80"]}
// BAD: error: unknown target 'sm_61'; supported targets are sm_80, sm_90a, sm_100a
// TWICE: error: target 'sm_80' is listed twice
module {}
