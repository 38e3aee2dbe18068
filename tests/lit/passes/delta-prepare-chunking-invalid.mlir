// RUN: deltac-opt %s --pass-pipeline='builtin.module(func.func(delta-prepare-chunking))' -split-input-file -verify-diagnostics
// RUN: not deltac-opt %s --pass-pipeline='builtin.module(func.func(delta-prepare-chunking{chunk-size=48}))' 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: chunk size 48 is not supported; use 16, 32 or 64

// expected-error @+1 {{prefill function has no 'delta.chunk_size'; give the pass a chunk-size}}
func.func @no_chunk() attributes {delta.entry = #delta<entry prefill>} {
  return
}
