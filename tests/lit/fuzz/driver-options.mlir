// target=sm_100a
// decode-tuning=rows-per-thread=2 dot-partials=8 unswitch-steps=false variants=small
// prefill-plan=value-tiles=16
// name=seed_lib
// The leading lines above are deltac-spec-fuzzer's header (SpecFuzzer.cpp):
// the driver options it applies to the spec below. As a seed (make_corpus.py
// takes every lit file) it teaches the fuzzer that header; as a test it
// runs the same options through deltac and compiles the library's wrapper.
// RUN: rm -rf %t && deltac %s --target=sm_100a --decode-tuning="rows-per-thread=2 dot-partials=8 unswitch-steps=false variants=small" --prefill-plan=value-tiles=16 -o %t --name=seed_lib | FileCheck %s
// RUN: %cxx -std=c++17 -fsyntax-only -I %t %t/seed_lib.cpp

// CHECK: 4 kernels planned, 4 generated
// CHECK: seed_k32_v32_decode_small.sm_100a
// CHECK: deltac: wrote library 'seed_lib'

delta.spec @seed rule = gated dims = [32x32] io = bf16 state = f32
    layout = kv gate = raw beta = sigmoid l2norm chunk = 32
    entries = [prefill, decode] max_t = 4
