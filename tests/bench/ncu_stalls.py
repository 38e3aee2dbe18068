"""Warp-stall summary of an Nsight Compute source page.

Input: `ncu --import R.ncu-rep --page source --csv --print-source sass`
(run.sh profile-prefill writes it as ncu_<shape>_sass.csv). Prints, per
kernel, the share of each stall reason over all warp-state samples and
the instructions with the most samples (SASS text, top two reasons);
samples of a reason the page has no column for count as "other".
Usage: ncu_stalls.py FILE.csv [--top N]
"""
import argparse
import collections
import csv


def kernels(path):
    """(kernel name, rows as dicts) for each kernel in the file."""
    name, header, rows = None, None, []
    for r in csv.reader(open(path)):
        if r and r[0] == "Kernel Name":
            if name and rows:
                yield name, rows
            name, header, rows = r[1], None, []
        elif r and r[0] == "Address":
            header = r
        elif header and r:
            rows.append(dict(zip(header, r)))
    if name and rows:
        yield name, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    for name, rows in kernels(args.csv):
        reasons = [h for h in rows[0] if h.startswith("stall_") and "Not Issued" not in h]
        samples = lambda r: int(r.get("Warp Stall Sampling (All Samples)") or 0)  # noqa: E731
        total = sum(samples(r) for r in rows) or 1
        # Samples whose reason has no column on the source page (a wgmma
        # waiting for the tensor cores was one, on the H200): counted as
        # "other", so that they are not silently missing from the shares.
        def counts(r):
            c = {h: int(r[h] or 0) for h in reasons}
            c["stall_other"] = max(0, samples(r) - sum(c.values()))
            return c
        by_reason = collections.Counter()
        for r in rows:
            by_reason.update(counts(r))
        print(f"== {name}: {len(rows)} instructions, {total} samples")
        print("  " + ", ".join(f"{h[6:]} {100 * v / total:.1f}%" for h, v in by_reason.most_common(6)))
        for r in sorted(rows, key=samples, reverse=True)[:args.top]:
            top = sorted(((v, h[6:]) for h, v in counts(r).items()), reverse=True)[:2]
            why = ", ".join(f"{h} {v}" for v, h in top if v)
            print(f"  {100 * samples(r) / total:5.1f}%  {r['Source'].strip()[:64]:64s} {why}")


if __name__ == "__main__":
    main()
