"""A decode call (default B = 1, T = 1) and a kernel that reads and writes
as many bytes as its state, for Nsight Compute (tests/gpu/run.sh
profile-decode): issue 32's floor is a graph holding one copy of the 2 MiB
state (read and written), so the profile puts deltac's kernel beside an
elementwise kernel over those bytes (torch's plain copy_ is a cudaMemcpy,
which ncu does not profile).
Each runs WARM + 1 times eagerly; ncu profiles the last of each (an NVTX
range "profile").
Usage: profile_decode.py --lib libdeltac_test_decode.so [--layout vk|kv]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import torch

import timing as H
from bench_decode import SPEC, Library

WARM = 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--layout", default="vk", choices=sorted(SPEC))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=1)
    args = ap.parse_args()
    lib = Library(args.lib)
    q, k, v, g, beta, h0 = H.decode_inputs(args.batch, T=args.tokens)
    pool = h0.clone() if args.layout == "kv" else h0.transpose(-1, -2).contiguous()
    o = torch.empty_like(v)
    src = torch.randn(pool.numel(), device="cuda")
    dst = torch.empty_like(src)
    for _ in range(WARM):
        lib.decode(SPEC[args.layout], q, k, v, o, pool, g=g, beta=beta)
        torch.mul(src, 1.0, out=dst)
    torch.cuda.synchronize()
    # ncu --nvtx-include profile/: only these two launches are profiled.
    torch.cuda.nvtx.range_push("profile")
    lib.decode(SPEC[args.layout], q, k, v, o, pool, g=g, beta=beta)
    torch.mul(src, 1.0, out=dst)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"decode {args.layout} B = {args.batch} T = {args.tokens}: "
          f"state {pool.numel() * 4 >> 10} KiB; elementwise kernel over {src.numel() * 4 >> 10} KiB")


if __name__ == "__main__":
    main()
