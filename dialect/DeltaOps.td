//===- DeltaOps.td - delta dialect operations -----------------*- tablegen -*-===//
//
// Four groups of ops: the spec (what a library holds), the sequence level
// (the recurrence on whole sequences and the elementwise preparation of its
// inputs), the preparation for chunking, and the chunk level
// (DeltaChunkOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef DELTA_OPS_TD
#define DELTA_OPS_TD

include "dialect/DeltaAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Delta_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Delta_IndexTensor : RankedTensorOf<[I32, I64]>;

//===----------------------------------------------------------------------===//
// Spec
//===----------------------------------------------------------------------===//

def Delta_SpecOp : Delta_Op<"spec", [Symbol]> {
  let summary = "the compile-time description of a kernel library";
  let description = [{
    Fixes what is decided when kernels are generated: the rule, one or more
    (K, V) specializations, the io and state element types, the state
    layout, the gate and beta forms, in-kernel q/k L2 normalisation, the
    chunk size used by prefill and the entry points (decode with its largest
    T). Heads, lengths, batch, scale and pool sizes are run-time arguments
    and do not appear here. Every inconsistent combination is rejected by
    the verifier. `per_value` adds flash-linear-attention's per-value terms
    to the decode kernels: a log decay per value column (FLA's `gv`,
    `[B, T, HV, V]`) and a beta per value column (`[B, T, HV, V]`); they
    have no chunked form (each value column would carry its own transition),
    so such a spec has no prefill entry.

    `beta = call` and `l2norm = call` leave those options to each call:
    one set of kernels serves every beta form (given, sigmoid, sigmoid2)
    or both choices of q/k normalisation, read from the call's options
    (the sequence-level function's trailing `options` argument, the host
    API's `qk_l2norm` and `beta_form`), instead of one spec, and one set
    of kernels, per combination.

    ```mlir
    delta.spec @qwen3_next rule = gated dims = [128x128] io = bf16
        state = f32 layout = vk gate = raw beta = sigmoid l2norm chunk = 64
        entries = [prefill, decode] max_t = 4
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    Delta_RuleAttr:$rule,
    Delta_DimsArrayAttr:$dims,
    TypeAttr:$io_type,
    TypeAttr:$state_type,
    Delta_StateLayoutAttr:$layout,
    Delta_GateFormAttr:$gate,
    Delta_BetaFormAttr:$beta,
    UnitAttr:$qk_l2norm,
    UnitAttr:$l2norm_call,
    UnitAttr:$per_value,
    I64Attr:$chunk_size,
    Delta_EntryKindArrayAttr:$entries,
    OptionalAttr<I64Attr>:$max_t
  );
  let assemblyFormat = [{
    $sym_name `rule` `=` `` $rule `dims` `=` custom<DimsList>($dims)
    `io` `=` $io_type `state` `=` $state_type `layout` `=` `` $layout
    `gate` `=` `` $gate `beta` `=` `` $beta
    custom<L2Norm>($qk_l2norm, $l2norm_call)
    (`per_value` $per_value^)?
    `chunk` `=` $chunk_size `entries` `=` custom<EntryList>($entries)
    (`max_t` `=` $max_t^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// True when the spec lists `kind` among its entry points.
    bool hasEntry(::mlir::delta::EntryKind kind);
    /// The (K, V) pairs, in the order written.
    ::llvm::SmallVector<std::pair<int64_t, int64_t>> getDimPairs();
  }];
}

//===----------------------------------------------------------------------===//
// Sequence level
//===----------------------------------------------------------------------===//

def Delta_RecurrenceOp : Delta_Op<"recurrence",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "the delta-rule recurrence over whole sequences";
  let description = [{
    States what is computed, per value head, token by token:

        S = exp(g_t) S;  u = beta_t (v_t - S^T k_t);  S = S + k_t u^T;
        o_t = scale S^T q_t

    (`kda`: S = Diag(exp(g_t)) S with g_t a K-vector; `delta`: no gate).
    With `gv` (`[B, T, HV, V]`, log decays per value column, FLA's `gv`)
    each column j of S is further scaled by exp(gv_t[j]) after the gate; a
    `beta` of shape `[B, T, HV, V]` gives each value column its own beta.
    Neither has a chunked form: such a recurrence lowers to decode only.
    Shapes: q, k `[B, T, H, K]`; v, o `[B, T, HV, V]` with HV % H == 0;
    g `[B, T, HV]` (`[B, T, HV, K]` for `kda`); beta `[B, T, HV]`; states
    `[N, HV, K, V]` (`kv`) or `[N, HV, V, K]` (`vk`). With `cu_seqlens`
    (`[N + 1]`) B is 1 and the T axis holds N packed sequences, each with its
    own state; otherwise N = B. `g` holds log-space decays, decay factors or
    raw `a` as `gate` says; `raw` forms also take `a_log` `[HV]` and
    `dt_bias` (`[HV]`, or `[HV * K]` per channel); `beta` holds beta or its
    logits as `beta_form` says. Without `initial_state` the state starts at
    zero. `beta = call` and `l2norm = call` take the choice from `options`
    (i32, bits of deltac_abi::CallOptions: kCallL2Norm, kCallBetaSigmoid,
    kCallBetaTwice), which only they take.

    ```mlir
    %o, %s = delta.recurrence gated layout = vk gate = log beta = given
        q(%q : tensor<?x?x?x128xbf16>) k(%k : tensor<?x?x?x128xbf16>)
        v(%v : tensor<?x?x?x128xbf16>) g(%g : tensor<?x?x?xf32>)
        beta(%b : tensor<?x?x?xf32>) state(%s0 : tensor<?x?x128x128xf32>)
        scale(%scale : f32) -> tensor<?x?x?x128xbf16>, tensor<?x?x128x128xf32>
    ```
  }];
  let arguments = (ins
    Delta_RuleAttr:$rule,
    Delta_StateLayoutAttr:$layout,
    Delta_GateFormAttr:$gate,
    Delta_BetaFormAttr:$beta_form,
    UnitAttr:$qk_l2norm,
    UnitAttr:$l2norm_call,
    Delta_FloatTensor:$q,
    Delta_FloatTensor:$k,
    Delta_FloatTensor:$v,
    Optional<Delta_FloatTensor>:$g,
    Optional<Delta_FloatTensor>:$gv,
    Delta_FloatTensor:$beta,
    Optional<Delta_FloatTensor>:$a_log,
    Optional<Delta_FloatTensor>:$dt_bias,
    Optional<Delta_FloatTensor>:$initial_state,
    Optional<Delta_IndexTensor>:$cu_seqlens,
    F32:$scale,
    Optional<I32>:$options
  );
  let results = (outs Delta_FloatTensor:$o, Delta_FloatTensor:$final_state);
  let assemblyFormat = [{
    `` $rule `layout` `=` `` $layout `gate` `=` `` $gate `beta` `=` `` $beta_form
    custom<L2Norm>($qk_l2norm, $l2norm_call)
    `q` `(` $q `:` type($q) `)` `k` `(` $k `:` type($k) `)`
    `v` `(` $v `:` type($v) `)` (`g` `(` $g^ `:` type($g) `)`)?
    (`gv` `(` $gv^ `:` type($gv) `)`)?
    `beta` `(` $beta `:` type($beta) `)`
    (`a_log` `(` $a_log^ `:` type($a_log) `)`)?
    (`dt_bias` `(` $dt_bias^ `:` type($dt_bias) `)`)?
    (`state` `(` $initial_state^ `:` type($initial_state) `)`)?
    (`cu_seqlens` `(` $cu_seqlens^ `:` type($cu_seqlens) `)`)?
    `scale` `(` $scale `:` type($scale) `)`
    (`options` `(` $options^ `:` type($options) `)`)? attr-dict
    `->` type($o) `,` type($final_state)
  }];
  let hasVerifier = 1;
}

def Delta_L2NormOp : Delta_Op<"l2norm", [Pure, SameOperandsAndResultShape]> {
  let summary = "L2 normalisation over the last axis";
  let description = [{
    `x / sqrt(sum(x^2) + 1e-6)` over the innermost axis, computed in f32;
    the result type may widen the element type so no rounding happens
    before the recurrence.

    ```mlir
    %qn = delta.l2norm %q : tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xf32>
    ```
  }];
  let arguments = (ins Delta_FloatTensor:$input);
  let results = (outs Delta_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Delta_GateFromRawOp : Delta_Op<"gate_from_raw", [Pure]> {
  let summary = "log-space decay from raw projections (Qwen3-Next form)";
  let description = [{
    `g = -exp(a_log[h]) * softplus(a + dt_bias)` with softplus threshold 20.
    `a` is `[B, T, HV]` with `a_log`, `dt_bias` `[HV]`, or per channel
    `[B, T, HV, K]` with `a_log` `[HV]` and `dt_bias` `[HV * K]`.

    ```mlir
    %g = delta.gate_from_raw %a, %a_log, %dt_bias
        : tensor<?x?x?xbf16>, tensor<?xf32>, tensor<?xf32> -> tensor<?x?x?xf32>
    ```
  }];
  let arguments = (ins Delta_FloatTensor:$a, Delta_FloatTensor:$a_log,
                       Delta_FloatTensor:$dt_bias);
  let results = (outs Delta_FloatTensor:$g);
  let assemblyFormat = [{
    $a `,` $a_log `,` $dt_bias attr-dict `:` type($a) `,` type($a_log) `,`
    type($dt_bias) `->` type($g)
  }];
  let hasVerifier = 1;
}

def Delta_GateFromLinearOp : Delta_Op<"gate_from_linear",
    [Pure, SameOperandsAndResultShape]> {
  let summary = "log-space decay from a decay factor alpha in (0, 1]";
  let description = [{
    `g = log(alpha)`. Alpha must lie in (0, 1]; alpha = 0 gives -inf.

    ```mlir
    %g = delta.gate_from_linear %alpha : tensor<?x?x?xf32> -> tensor<?x?x?xf32>
    ```
  }];
  let arguments = (ins Delta_FloatTensor:$alpha);
  let results = (outs Delta_FloatTensor:$g);
  let assemblyFormat = "$alpha attr-dict `:` type($alpha) `->` type($g)";
}

def Delta_BetaSigmoidOp : Delta_Op<"beta_sigmoid",
    [Pure, SameOperandsAndResultShape]> {
  let summary = "beta from logits: factor * sigmoid(b)";
  let description = [{
    `beta = factor * sigmoid(b)`; factor is 1, or 2 to allow negative
    eigenvalues of the transition.

    ```mlir
    %beta = delta.beta_sigmoid %b factor = 2.0 : tensor<?x?x?xbf16> -> tensor<?x?x?xf32>
    ```
  }];
  let arguments = (ins Delta_FloatTensor:$logits, F32Attr:$factor);
  let results = (outs Delta_FloatTensor:$beta);
  let assemblyFormat = [{
    $logits `factor` `=` $factor attr-dict `:` type($logits) `->` type($beta)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Preparation for chunking
//===----------------------------------------------------------------------===//

def Delta_ChunkCumsumOp : Delta_Op<"chunk_cumsum", [Pure]> {
  let summary = "inclusive cumulative sum of log decays inside each chunk";
  let description = [{
    `Gamma_t = sum of g_s for s from the first token of t's chunk to t`.
    Chunks of `chunk_size` tokens start at every sequence start (a
    `cu_seqlens` boundary, or token 0 of each batch row) and restart every
    `chunk_size` tokens after it; the last chunk of a sequence may be
    partial. Works on `[B, T, HV]` and per channel on `[B, T, HV, K]`.

    ```mlir
    %gamma = delta.chunk_cumsum %g chunk = 64 : tensor<?x?x?xf32> -> tensor<?x?x?xf32>
    ```
  }];
  let arguments = (ins Delta_FloatTensor:$g,
                       Optional<Delta_IndexTensor>:$cu_seqlens,
                       I64Attr:$chunk_size);
  let results = (outs Delta_FloatTensor:$gamma);
  let assemblyFormat = [{
    $g (`cu_seqlens` `(` $cu_seqlens^ `:` type($cu_seqlens) `)`)?
    `chunk` `=` $chunk_size attr-dict `:` type($g) `->` type($gamma)
  }];
  let hasVerifier = 1;
}

def Delta_ChunkedRecurrenceOp : Delta_Op<"chunked_recurrence",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "the recurrence in canonical form, ready to be chunked";
  let description = [{
    The same math as `delta.recurrence` restricted to the canonical options
    (log-space decays, given beta, no in-op normalisation), with the decays
    already summed inside chunks of `chunk_size` tokens (`gamma`, from
    `delta.chunk_cumsum`). `delta-chunk` rewrites it into chunk-level IR.

    ```mlir
    %o, %s = delta.chunked_recurrence gated layout = kv chunk = 64
        q(%q : tensor<1x?x?x64xf32>) k(%k : tensor<1x?x?x64xf32>)
        v(%v : tensor<1x?x?x64xf32>) gamma(%gm : tensor<1x?x?xf32>)
        beta(%b : tensor<1x?x?xf32>) scale(%scale : f32)
        -> tensor<1x?x?x64xf32>, tensor<?x?x64x64xf32>
    ```
  }];
  let arguments = (ins
    Delta_RuleAttr:$rule,
    Delta_StateLayoutAttr:$layout,
    I64Attr:$chunk_size,
    Delta_FloatTensor:$q,
    Delta_FloatTensor:$k,
    Delta_FloatTensor:$v,
    Optional<Delta_FloatTensor>:$gamma,
    Delta_FloatTensor:$beta,
    Optional<Delta_FloatTensor>:$initial_state,
    Optional<Delta_IndexTensor>:$cu_seqlens,
    F32:$scale
  );
  let results = (outs Delta_FloatTensor:$o, Delta_FloatTensor:$final_state);
  let assemblyFormat = [{
    `` $rule `layout` `=` `` $layout `chunk` `=` $chunk_size
    `q` `(` $q `:` type($q) `)` `k` `(` $k `:` type($k) `)`
    `v` `(` $v `:` type($v) `)` (`gamma` `(` $gamma^ `:` type($gamma) `)`)?
    `beta` `(` $beta `:` type($beta) `)`
    (`state` `(` $initial_state^ `:` type($initial_state) `)`)?
    (`cu_seqlens` `(` $cu_seqlens^ `:` type($cu_seqlens) `)`)?
    `scale` `(` $scale `:` type($scale) `)` attr-dict
    `->` type($o) `,` type($final_state)
  }];
  let hasVerifier = 1;
}

include "dialect/DeltaChunkOps.td"

#endif // DELTA_OPS_TD
