// RUN: deltac-opt %s --pass-pipeline='builtin.module(func.func(delta-prepare-chunking))' -split-input-file -verify-diagnostics
// RUN: not deltac-opt %s --pass-pipeline='builtin.module(func.func(delta-prepare-chunking{chunk-size=48}))' 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: chunk size 48 is not supported; use 16, 32 or 64

// expected-error @+1 {{prefill function has no 'delta.chunk_size'; give the pass a chunk-size}}
func.func @no_chunk() attributes {delta.entry = #delta<entry prefill>} {
  return
}

// -----

// gv (and a beta per value column) give each value column its own
// transition: no chunked form.
func.func @per_value(%q: tensor<1x?x2x64xbf16>, %k: tensor<1x?x2x64xbf16>,
                     %v: tensor<1x?x2x64xbf16>, %gv: tensor<1x?x2x64xf32>,
                     %b: tensor<1x?x2x64xbf16>, %scale: f32)
    attributes {delta.entry = #delta<entry prefill>, delta.chunk_size = 64} {
  // expected-error @+1 {{per-value terms (gv, a beta per value column) have no chunked form; they lower to decode only}}
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<1x?x2x64xbf16>) k(%k : tensor<1x?x2x64xbf16>)
      v(%v : tensor<1x?x2x64xbf16>) gv(%gv : tensor<1x?x2x64xf32>)
      beta(%b : tensor<1x?x2x64xbf16>)
      scale(%scale : f32) -> tensor<1x?x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}
