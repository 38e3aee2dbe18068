//===- DeltaAttrs.td - delta dialect attributes ---------------*- tablegen -*-===//
//
// Enumerations of the compile-time options of a spec, and the (K, V) pair of
// one specialization.
//
//===----------------------------------------------------------------------===//

#ifndef DELTA_ATTRS_TD
#define DELTA_ATTRS_TD

include "dialect/DeltaDialect.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enumerations
//===----------------------------------------------------------------------===//

def Delta_Rule : I32EnumAttr<"Rule", "delta rule", [
    I32EnumAttrCase<"delta", 0>,   // DeltaNet: no decay
    I32EnumAttrCase<"gated", 1>,   // Gated DeltaNet: one decay per head
    I32EnumAttrCase<"kda", 2>      // Kimi Delta Attention: decay per K channel
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_StateLayout : I32EnumAttr<"StateLayout", "state layout", [
    I32EnumAttrCase<"kv", 0>,      // S is [K, V] (FLA's default)
    I32EnumAttrCase<"vk", 1>       // S^T is stored, [V, K] (serving pools)
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_GateForm : I32EnumAttr<"GateForm", "gate form", [
    I32EnumAttrCase<"none", 0>,        // no gate (rule `delta`)
    I32EnumAttrCase<"log", 1>,         // log-space decay g per head
    I32EnumAttrCase<"linear", 2>,      // decay factor alpha in (0, 1] per head
    I32EnumAttrCase<"raw", 3>,         // g = -exp(A_log) softplus(a + dt_bias)
    I32EnumAttrCase<"channel_log", 4>, // log-space decay per K channel
    I32EnumAttrCase<"channel_raw", 5>, // raw form with dt_bias per K channel
    I32EnumAttrCase<"call", 6>,        // log or raw per head, chosen per call (options)
    I32EnumAttrCase<"channel_call", 7> // channel_log or channel_raw, chosen per call
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_BetaForm : I32EnumAttr<"BetaForm", "beta form", [
    I32EnumAttrCase<"given", 0>,       // beta as given, any value in (0, 2)
    I32EnumAttrCase<"sigmoid", 1>,     // beta = sigmoid(b)
    I32EnumAttrCase<"sigmoid2", 2>,    // beta = 2 sigmoid(b) (negative eigenvalues)
    I32EnumAttrCase<"call", 3>         // one of the three, chosen per call (options)
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_EntryKind : I32EnumAttr<"EntryKind", "entry point", [
    I32EnumAttrCase<"prefill", 0>,     // chunked prefill over whole sequences
    I32EnumAttrCase<"decode", 1>       // recurrent step, T = 1..max_t
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_KernelRole : I32EnumAttr<"KernelRole", "kernel role", [
    I32EnumAttrCase<"decode", 0>,       // the recurrent step of a decode entry
    I32EnumAttrCase<"prep", 1>,         // prefill: norms, gates, cumulative decays
    I32EnumAttrCase<"chunks", 2>,       // prefill: every chunk's state-free products
    I32EnumAttrCase<"queue", 3>,        // prefill: chunks from a queue (overlapped launch)
    I32EnumAttrCase<"chunks_raw", 4>,   // prefill: chunks' form for recur's raw q/k reads
    I32EnumAttrCase<"recur", 5>,        // prefill: the chunk-serial state chain
    I32EnumAttrCase<"recur_shared", 6>, // prefill: recur beside one queue block per SM
    I32EnumAttrCase<"recur_cp", 7>,     // prefill: recur over segments, with their transfers
    I32EnumAttrCase<"cp_chain", 8>,     // prefill: the chain of segment transfers
    I32EnumAttrCase<"cp_correct", 9>    // prefill: segment outputs corrected by their entering state
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_KernelCode : I32EnumAttr<"KernelCode", "kind of target code", [
    I32EnumAttrCase<"all", 0>,          // one code for every target (decode, prep)
    I32EnumAttrCase<"cp_async", 1>,     // sm_80: cp.async copies
    I32EnumAttrCase<"bulk", 2>,         // sm_90+: bulk copies (prefill), dependent launch
    I32EnumAttrCase<"wgmma", 3>         // sm_90a: warpgroup MMA forms
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Delta_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Delta_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// Printed bare inside op assembly (`gated`), as `#delta<rule gated>` alone.
def Delta_RuleAttr : EnumAttr<Delta_Dialect, Delta_Rule, "rule">;
def Delta_StateLayoutAttr : EnumAttr<Delta_Dialect, Delta_StateLayout, "layout">;
def Delta_GateFormAttr : EnumAttr<Delta_Dialect, Delta_GateForm, "gate">;
def Delta_BetaFormAttr : EnumAttr<Delta_Dialect, Delta_BetaForm, "beta">;
def Delta_EntryKindAttr : EnumAttr<Delta_Dialect, Delta_EntryKind, "entry">;

def Delta_DimsAttr : Delta_Attr<"Dims", "dims"> {
  let summary = "key and value head dims of one specialization";
  let description = [{
    One (K, V) pair. A spec lists several to emit several specializations
    into one library.

    ```mlir
    #delta.dims<k = 128, v = 128>
    ```
  }];
  let parameters = (ins "int64_t":$k, "int64_t":$v);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Delta_RecurVariantAttr : Delta_Attr<"RecurVariant", "recur_variant"> {
  let summary = "one recur kernel of a prefill plan and when the host launches it";
  let description = [{
    An entry of `delta.recur_variants`, the plan delta-plan-prefill writes
    and delta-lower-prefill-to-gpu and the library writer read: the recur
    kernel's V tile; `min_blocks_per_sm`, in quarters of a block per SM, from
    which grid the host launches it (0: always, the fallback); and
    `overlap_blocks_per_sm`, up to which grid it runs overlapped with chunks
    (0: never).

    ```mlir
    #delta.recur_variant<value_tile = 64, min_blocks_per_sm = 1, overlap_blocks_per_sm = 1>
    ```
  }];
  let parameters = (ins "int64_t":$value_tile, "int64_t":$min_blocks_per_sm,
                        "int64_t":$overlap_blocks_per_sm);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Delta_ContextParallelAttr : Delta_Attr<"ContextParallel", "context_parallel"> {
  let summary = "when the host splits a prefill call's sequences into segments";
  let description = [{
    `delta.context_parallel`, written by delta-plan-prefill beside
    `delta.recur_variants` and carried by the GPU lowering onto the
    context-parallel recur (`recur_cp`): the dispatch splits each sequence
    into segments (docs/context-parallelism.md) where a busy sequence has
    at least `min_tokens` tokens and recur's grid (busy sequences x value
    heads x V tiles) has at most `eighths_per_sm` eighths of a block per SM
    (0: the dispatch never chooses it; a forced call and a rank's phase of
    a multi-GPU call still run the kernels).

    ```mlir
    #delta.context_parallel<min_tokens = 8192, eighths_per_sm = 1>
    ```
  }];
  let parameters = (ins "int64_t":$min_tokens, "int64_t":$eighths_per_sm);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Delta_SharedOverlapAttr : Delta_Attr<"SharedOverlap", "shared_overlap"> {
  let summary = "when the host takes the shared overlapped prefill launch";
  let description = [{
    `delta.shared_overlap`, written by delta-plan-prefill beside
    `delta.recur_variants` and carried by the GPU lowering onto the shared
    recur (`recur_shared`): the host runs chunks' queue and that recur side
    by side on shared SMs where recur's grid has at most `quarters_per_sm`
    quarters of a block per SM and the call has between `min_tokens` and
    `max_tokens` tokens per sequence (docs/PERFORMANCE.md, the shared
    overlapped launch; a forced call takes it anywhere it can run).

    ```mlir
    #delta.shared_overlap<min_tokens = 1024, max_tokens = 16384, quarters_per_sm = 2>
    ```
  }];
  let parameters = (ins "int64_t":$min_tokens, "int64_t":$max_tokens,
                        "int64_t":$quarters_per_sm);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Delta_KernelAttr : Delta_Attr<"Kernel", "kernel"> {
  let summary = "what the host must know to launch one generated kernel";
  let description = [{
    Set on every kernel (`gpu.func`) by the GPU lowerings as `delta.kernel`
    and read by the library writer, which builds the variant tables from it
    alone: the kernel's role in its entry point, the kind of target code its
    module holds (several modules may define one kernel, one per kind), the
    specialization (K, V), the V columns one block covers (`value_tile`),
    the grid along V, the block size, the dynamic shared memory at launch
    and what one more pipeline stage adds, the dispatch bound
    (`min_blocks_per_sm`, in quarters of a block per SM; 0: always), the
    overlapped launch's bound (`overlap_blocks_per_sm`; 0: none) and
    whether recur has the form that reads raw q and k (`raw_qk`); for a
    decode kernel, the fewest tokens a row of a call it serves
    (`min_tokens`, set on the staged form; 0: any call); for the
    context-parallel recur (`recur_cp`), the plan's
    #delta.context_parallel as `min_tokens` and `cp_eighths_per_sm`; for
    the shared recur (`recur_shared`), the plan's #delta.shared_overlap as
    `min_tokens`, `max_tokens` and `overlap_blocks_per_sm`.

    ```mlir
    #delta.kernel<role = recur, code = wgmma, k = 128, v = 128,
                  value_tile = 64, grid_x = 2, block_threads = 256,
                  dynamic_smem = 135168, dynamic_smem_stage = 60416,
                  overlap_blocks_per_sm = 1, raw_qk = true>
    ```
  }];
  let parameters = (ins
    EnumParameter<Delta_KernelRole>:$role,
    EnumParameter<Delta_KernelCode>:$code,
    "int64_t":$k, "int64_t":$v, "int64_t":$value_tile, "int64_t":$grid_x,
    "int64_t":$block_threads,
    DefaultValuedParameter<"int64_t", "0">:$dynamic_smem,
    DefaultValuedParameter<"int64_t", "0">:$dynamic_smem_stage,
    DefaultValuedParameter<"int64_t", "0">:$min_blocks_per_sm,
    DefaultValuedParameter<"int64_t", "0">:$overlap_blocks_per_sm,
    DefaultValuedParameter<"bool", "false">:$raw_qk,
    DefaultValuedParameter<"int64_t", "0">:$min_tokens,
    DefaultValuedParameter<"int64_t", "0">:$cp_eighths_per_sm,
    DefaultValuedParameter<"int64_t", "0">:$max_tokens);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Delta_DimsArrayAttr : TypedArrayAttrBase<Delta_DimsAttr,
                                             "list of (K, V) specializations">;
def Delta_EntryKindArrayAttr : TypedArrayAttrBase<Delta_EntryKindAttr,
                                                  "list of entry points">;

#endif // DELTA_ATTRS_TD
