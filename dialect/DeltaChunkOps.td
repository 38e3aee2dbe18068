//===- DeltaChunkOps.td - chunk-level operations --------------*- tablegen -*-===//
//
// The chunk level of DESIGN.md "Layers of IR": what `delta-chunk` writes and
// both lowerings (the CPU one through linalg, the GPU one) consume. Every op
// works on one chunk of one value head: C tokens (C = 16, 32 or 64) held in
// static f32 tensors, a partial last chunk padded so the padding provably
// contributes nothing (zero k, v, q and beta; decays repeated from the last
// real token). The state is always [K, V] f32 here; `state_load` and
// `state_store` translate to and from the pool's layout and element type.
//
// Notation (DESIGN.md): Gamma = decays summed inside the chunk ([C] for
// `gated`, [C, K] for `kda`, absent for `delta`); every exponential is of a
// non-positive difference Gamma_i - Gamma_j taken on i >= j only.
//
//===----------------------------------------------------------------------===//

#ifndef DELTA_CHUNK_OPS_TD
#define DELTA_CHUNK_OPS_TD

def Delta_ChunkTensor : RankedTensorOf<[F32]>;

def Delta_ChunkLoadOp : Delta_Op<"chunk_load", [Pure]> {
  let summary = "one chunk of a per-token tensor, converted to f32 and padded";
  let description = [{
    Reads rows `start .. start + length - 1` of batch row `batch` and head
    `head` from a `[B, T, Hx, D]` (or `[B, T, Hx]`) tensor into a `[C, D]`
    (or `[C]`) f32 tensor. Rows at and after `length` are zero, or with
    `edge` a copy of row `length - 1` (for summed decays, so the chunk's
    last row holds the decay of its last real token). `length` must lie in
    [1, C].

    ```mlir
    %kc = delta.chunk_load %k[%b, %t0, %h] len(%n)
        : tensor<1x?x?x128xbf16> -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins Delta_FloatTensor:$source, Index:$batch, Index:$start,
                       Index:$head, Index:$length, UnitAttr:$edge);
  let results = (outs Delta_ChunkTensor:$chunk);
  let assemblyFormat = [{
    $source `[` $batch `,` $start `,` $head `]` `len` `(` $length `)`
    (`edge` $edge^)? attr-dict `:` type($source) `->` type($chunk)
  }];
  let hasVerifier = 1;
}

def Delta_ChunkStoreOp : Delta_Op<"chunk_store",
    [Pure, AllTypesMatch<["dest", "result"]>]> {
  let summary = "the first rows of a chunk written into a per-token tensor";
  let description = [{
    Returns `dest` with rows `start .. start + length - 1` of batch row
    `batch` and head `head` replaced by rows `0 .. length - 1` of `chunk`,
    converted to the element type of `dest`.

    ```mlir
    %o1 = delta.chunk_store %oc into %o[%b, %t0, %hv] len(%n)
        : tensor<64x128xf32> into tensor<1x?x?x128xbf16>
    ```
  }];
  let arguments = (ins Delta_ChunkTensor:$chunk, Delta_FloatTensor:$dest,
                       Index:$batch, Index:$start, Index:$head, Index:$length);
  let results = (outs Delta_FloatTensor:$result);
  let assemblyFormat = [{
    $chunk `into` $dest `[` $batch `,` $start `,` $head `]` `len` `(` $length `)`
    attr-dict `:` type($chunk) `into` type($dest)
  }];
  let hasVerifier = 1;
}

def Delta_StateLoadOp : Delta_Op<"state_load", [Pure]> {
  let summary = "one head's state from a state tensor, as [K, V] f32";
  let description = [{
    Reads `source[seq, head]` (`[K, V]` for layout `kv`, `[V, K]` for `vk`)
    and returns it as `[K, V]` f32.

    ```mlir
    %s = delta.state_load %s0[%n, %hv] layout = vk
        : tensor<?x?x128x128xf32> -> tensor<128x128xf32>
    ```
  }];
  let arguments = (ins Delta_FloatTensor:$source, Index:$seq, Index:$head,
                       Delta_StateLayoutAttr:$layout);
  let results = (outs Delta_ChunkTensor:$state);
  let assemblyFormat = [{
    $source `[` $seq `,` $head `]` `layout` `=` `` $layout attr-dict `:`
    type($source) `->` type($state)
  }];
  let hasVerifier = 1;
}

def Delta_StateStoreOp : Delta_Op<"state_store",
    [Pure, AllTypesMatch<["dest", "result"]>]> {
  let summary = "one head's [K, V] f32 state written into a state tensor";
  let description = [{
    Returns `dest` with `dest[seq, head]` replaced by `state`, transposed for
    layout `vk` and converted to the element type of `dest`.

    ```mlir
    %sf1 = delta.state_store %s into %sf[%n, %hv] layout = vk
        : tensor<128x128xf32> into tensor<?x?x128x128xf32>
    ```
  }];
  let arguments = (ins Delta_ChunkTensor:$state, Delta_FloatTensor:$dest,
                       Index:$seq, Index:$head, Delta_StateLayoutAttr:$layout);
  let results = (outs Delta_FloatTensor:$result);
  let assemblyFormat = [{
    $state `into` $dest `[` $seq `,` $head `]` `layout` `=` `` $layout
    attr-dict `:` type($state) `into` type($dest)
  }];
  let hasVerifier = 1;
}

def Delta_ChunkKktOp : Delta_Op<"chunk_kkt", [Pure]> {
  let summary = "the strictly lower gated, beta-scaled K K^T of a chunk";
  let description = [{
    `L_ij = beta_i exp(Gamma_i - Gamma_j) <k_i, k_j>` for i > j and 0
    elsewhere (`kda`: `beta_i sum_d k_id k_jd exp(Gamma_id - Gamma_jd)`;
    `delta`: no exponential). The transition of the chunk is `I + L`.

    ```mlir
    %l = delta.chunk_kkt %kc, %bc gamma(%gc : tensor<64xf32>)
        : tensor<64x128xf32>, tensor<64xf32> -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Delta_ChunkTensor:$k, Delta_ChunkTensor:$beta,
                       Optional<Delta_ChunkTensor>:$gamma);
  let results = (outs Delta_ChunkTensor:$l);
  let assemblyFormat = [{
    $k `,` $beta (`gamma` `(` $gamma^ `:` type($gamma) `)`)? attr-dict `:`
    type($k) `,` type($beta) `->` type($l)
  }];
  let hasVerifier = 1;
}

def Delta_SolveTrilOp : Delta_Op<"solve_tril",
    [Pure, AllTypesMatch<["l", "a"]>]> {
  let summary = "inverse of the unit lower triangular I + L";
  let description = [{
    `A = (I + L)^-1` for a strictly lower triangular `L` (entries on and
    above the diagonal are ignored), by forward substitution.

    ```mlir
    %a = delta.solve_tril %l : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Delta_ChunkTensor:$l);
  let results = (outs Delta_ChunkTensor:$a);
  let assemblyFormat = "$l attr-dict `:` type($l)";
  let hasVerifier = 1;
}

def Delta_ChunkWyOp : Delta_Op<"chunk_wy", [Pure]> {
  let summary = "the WY factors W and U of a chunk";
  let description = [{
    `W = A diag(beta e^Gamma) K` (`kda`: `A diag(beta) (K ⊙ e^Gamma)`;
    `delta`: `A diag(beta) K`) and `U = A diag(beta) V`.

    ```mlir
    %w, %u = delta.chunk_wy %a, %kc, %vc, %bc gamma(%gc : tensor<64xf32>)
        : tensor<64x64xf32>, tensor<64x128xf32>, tensor<64x128xf32>,
          tensor<64xf32> -> tensor<64x128xf32>, tensor<64x128xf32>
    ```
  }];
  let arguments = (ins Delta_ChunkTensor:$a, Delta_ChunkTensor:$k,
                       Delta_ChunkTensor:$v, Delta_ChunkTensor:$beta,
                       Optional<Delta_ChunkTensor>:$gamma);
  let results = (outs Delta_ChunkTensor:$w, Delta_ChunkTensor:$u);
  let assemblyFormat = [{
    $a `,` $k `,` $v `,` $beta (`gamma` `(` $gamma^ `:` type($gamma) `)`)?
    attr-dict `:` type($a) `,` type($k) `,` type($v) `,` type($beta) `->`
    type($w) `,` type($u)
  }];
  let hasVerifier = 1;
}

def Delta_ChunkResidualOp : Delta_Op<"chunk_residual", [Pure]> {
  let summary = "the chunk's corrected values V' = U - W S";
  let description = [{
    What the chunk writes into the state beyond its decay: the values minus
    what the entering state `S` (`[K, V]`) already predicts for them.

    ```mlir
    %vn = delta.chunk_residual %u, %w, %s
        : tensor<64x128xf32>, tensor<64x128xf32>, tensor<128x128xf32>
          -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins Delta_ChunkTensor:$u, Delta_ChunkTensor:$w,
                       Delta_ChunkTensor:$state);
  let results = (outs Delta_ChunkTensor:$v_new);
  let assemblyFormat = [{
    $u `,` $w `,` $state attr-dict `:` type($u) `,` type($w) `,` type($state)
    `->` type($v_new)
  }];
  let hasVerifier = 1;
}

def Delta_ChunkOutputOp : Delta_Op<"chunk_output", [Pure]> {
  let summary = "the outputs of a chunk";
  let description = [{
    `O = scale (diag(e^Gamma) Q S + (Q K^T ⊙ M) V')` with
    `M_ij = exp(Gamma_i - Gamma_j)` for i >= j and 0 elsewhere (`kda`: the
    decays enter the dot products per channel; `delta`: `M` is the lower
    triangle of ones). `S` is the state entering the chunk.

    ```mlir
    %oc = delta.chunk_output %qc, %kc, %vn, %s scale(%scale)
        gamma(%gc : tensor<64xf32>) : tensor<64x128xf32>, tensor<64x128xf32>,
        tensor<64x128xf32>, tensor<128x128xf32> -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins Delta_ChunkTensor:$q, Delta_ChunkTensor:$k,
                       Delta_ChunkTensor:$v_new, Delta_ChunkTensor:$state,
                       F32:$scale, Optional<Delta_ChunkTensor>:$gamma);
  let results = (outs Delta_ChunkTensor:$o);
  let assemblyFormat = [{
    $q `,` $k `,` $v_new `,` $state `scale` `(` $scale `)`
    (`gamma` `(` $gamma^ `:` type($gamma) `)`)? attr-dict `:` type($q) `,`
    type($k) `,` type($v_new) `,` type($state) `->` type($o)
  }];
  let hasVerifier = 1;
}

def Delta_ChunkStateStepOp : Delta_Op<"chunk_state_step", [Pure]> {
  let summary = "the state leaving a chunk";
  let description = [{
    `S' = e^Gamma_last S + K^T diag(e^(Gamma_last - Gamma)) V'` where
    `Gamma_last` is the chunk's last row (`kda`: `Diag(e^Gamma_last) S +
    (K ⊙ e^(Gamma_last - Gamma))^T V'`; `delta`: `S + K^T V'`).

    ```mlir
    %s1 = delta.chunk_state_step %s, %kc, %vn gamma(%gc : tensor<64xf32>)
        : tensor<128x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>
          -> tensor<128x128xf32>
    ```
  }];
  let arguments = (ins Delta_ChunkTensor:$state, Delta_ChunkTensor:$k,
                       Delta_ChunkTensor:$v_new,
                       Optional<Delta_ChunkTensor>:$gamma);
  let results = (outs Delta_ChunkTensor:$new_state);
  let assemblyFormat = [{
    $state `,` $k `,` $v_new (`gamma` `(` $gamma^ `:` type($gamma) `)`)?
    attr-dict `:` type($state) `,` type($k) `,` type($v_new) `->`
    type($new_state)
  }];
  let hasVerifier = 1;
}

#endif // DELTA_CHUNK_OPS_TD
