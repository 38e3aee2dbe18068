// RUN: deltac-opt %s | FileCheck %s

// CHECK: module attributes {delta.targets = ["sm_90a", "sm_80", "sm_100a"]}
module attributes {delta.targets = ["sm_90a", "sm_80", "sm_100a"]} {}
