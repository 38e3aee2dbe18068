//===- DeltaOps.h - delta dialect operations --------------------*- C++ -*-===//
#ifndef DELTAC_DIALECT_DELTAOPS_H
#define DELTAC_DIALECT_DELTAOPS_H

#include "dialect/DeltaDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialect/DeltaOps.h.inc"

#endif // DELTAC_DIALECT_DELTAOPS_H
