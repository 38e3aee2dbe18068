//===- DeltaDialect.td - the delta dialect --------------------*- tablegen -*-===//
//
// The delta dialect describes delta-rule linear attention (DeltaNet, Gated
// DeltaNet, Kimi Delta Attention) at three levels: a declarative spec of what
// a kernel library holds, the recurrence on whole sequences, and (later) its
// chunked form.
//
//===----------------------------------------------------------------------===//

#ifndef DELTA_DIALECT_TD
#define DELTA_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Delta_Dialect : Dialect {
  let name = "delta";
  let cppNamespace = "::mlir::delta";
  let summary = "Delta-rule linear attention: specs, recurrences, chunks";
  let description = [{
    A `delta.spec` fixes everything that is decided when kernels are
    generated (rule, head dims, dtypes, state layout, gate and beta forms,
    chunk size, entry points). `delta-expand-spec` turns each spec into one
    function per specialization and entry point whose body is a
    `delta.recurrence` on whole sequences. Run-time values (batch, lengths,
    head counts, scale, pool sizes) stay dynamic in the IR.

    The module attribute `delta.targets` lists the SMs to generate for; it
    is set by the driver so lit tests stay hermetic.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Adds the ops (DeltaOps.cpp): the dialect's own files stay below
    /// the ops' in the include graph.
    void registerOperations();
    /// Name of the module attribute that lists the target SMs.
    static constexpr ::llvm::StringLiteral kTargetsAttrName = "delta.targets";
    /// Function attributes set by delta-expand-spec.
    static constexpr ::llvm::StringLiteral kSpecAttrName = "delta.spec";
    static constexpr ::llvm::StringLiteral kEntryAttrName = "delta.entry";
    static constexpr ::llvm::StringLiteral kDimsAttrName = "delta.dims";
    static constexpr ::llvm::StringLiteral kChunkSizeAttrName =
        "delta.chunk_size";
    static constexpr ::llvm::StringLiteral kMaxTAttrName = "delta.max_t";
    /// Launch values of a generated kernel (#delta.kernel, set by the GPU
    /// lowerings, read by the library writer).
    static constexpr ::llvm::StringLiteral kKernelAttrName = "delta.kernel";
    /// Prefill recur kernels and their dispatch (delta-plan-prefill).
    static constexpr ::llvm::StringLiteral kRecurVariantsAttrName =
        "delta.recur_variants";
    /// When the host splits sequences into segments (delta-plan-prefill).
    static constexpr ::llvm::StringLiteral kContextParallelAttrName =
        "delta.context_parallel";
    /// When the host takes the shared overlapped launch (delta-plan-prefill).
    static constexpr ::llvm::StringLiteral kSharedOverlapAttrName =
        "delta.shared_overlap";
    /// Argument attribute naming each function argument for the host API.
    static constexpr ::llvm::StringLiteral kArgNameAttrName = "delta.name";
  }];
}

class Delta_Op<string mnemonic, list<Trait> traits = []>
    : Op<Delta_Dialect, mnemonic, traits>;

#endif // DELTA_DIALECT_TD
