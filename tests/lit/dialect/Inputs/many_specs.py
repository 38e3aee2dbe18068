"""Prints N delta.spec ops with pairwise different configurations, then one
that duplicates the first (spec-duplicates-many.mlir)."""
import itertools
import sys

n = int(sys.argv[1])
combos = itertools.product(
    ["bf16", "f16", "f32"], ["f32", "bf16"], ["vk", "kv"],
    ["log", "linear", "raw"], ["given", "sigmoid"], ["", " l2norm"],
    [16, 32, 64], range(16, 257, 16), range(16, 257, 16))
for i, (io, st, lay, gate, beta, l2, chunk, k, v) in zip(range(n), combos):
    print(f"delta.spec @s{i} rule = gated dims = [{k}x{v}] io = {io} "
          f"state = {st} layout = {lay} gate = {gate} beta = {beta}{l2} "
          f"chunk = {chunk} entries = [decode] max_t = 1")
print("delta.spec @last rule = gated dims = [16x16] io = bf16 state = f32 "
      "layout = vk gate = log beta = given chunk = 16 entries = [decode] "
      "max_t = 4")
