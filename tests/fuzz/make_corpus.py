#!/usr/bin/env python3
"""Builds the seed corpus of deltac-spec-fuzzer from the source tree.

Nothing is checked in: every seed is derived, at test time, from

  * examples/*.mlir and tests/lit/**/*.mlir, each split on `// -----` lines
    into one seed per chunk (the convention of -split-input-file); an
    example with several specs also into one seed per spec (the whole
    example library is too slow an input under ASan: gdn.mlir took 9-17 s
    an input, past the fuzz test's 10 s);
  * the ```mlir blocks of the dialect's ODS descriptions (dialect/*.td) and
    of docs/**/*.md (fragments; they teach the fuzzer the op syntax);
  * with --deltac-opt, each example run through deltac-opt: the spec in
    generic form, and the module after expansion, option normalisation and
    chunk preparation (pretty and generic), so every delta op appears in a
    verified context.

Usage: make_corpus.py --source-dir SRC --out DIR [--deltac-opt PATH]
                      [--make-dirs DIR...]
The output directory is emptied first; --make-dirs creates the fuzzer's
working corpus and artifact directories, keeping what they hold. Prints
how many seeds it wrote.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

SPLIT = re.compile(r"^// -----.*$", re.MULTILINE)
FENCE = re.compile(r"```mlir\n(.*?)```", re.DOTALL)
SPEC = re.compile(r"^delta\.spec ", re.MULTILINE)

PIPELINES = {
    "spec-generic": (None, True),
    "expanded": ("delta-attach-targets{targets=sm_90a},delta-expand-spec",
                 False),
    "expanded-generic": (
        "delta-attach-targets{targets=sm_90a},delta-expand-spec", True),
    "normalized": ("delta-attach-targets{targets=sm_90a},delta-expand-spec,"
                   "delta-normalize-options", False),
    "chunked": ("delta-attach-targets{targets=sm_90a},delta-expand-spec,"
                "delta-normalize-options,func.func(delta-prepare-chunking)",
                False),
}


class Writer:
    def __init__(self, out):
        self.out = out
        self.count = 0
        self.seen = set()

    def add(self, name, text):
        text = text.strip("\n") + "\n"
        if not text.strip() or text in self.seen:
            return
        self.seen.add(text)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        with open(os.path.join(self.out, safe), "w", encoding="utf-8") as f:
            f.write(text)
        self.count += 1


def relname(path, root):
    return os.path.relpath(path, root).replace(os.sep, "_")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--deltac-opt")
    parser.add_argument("--make-dirs", nargs="*", default=[],
                        help="directories to create (kept if present)")
    args = parser.parse_args()
    src = os.path.abspath(args.source_dir)

    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    writer = Writer(args.out)
    for path in args.make_dirs:
        os.makedirs(path, exist_ok=True)

    examples = sorted(glob.glob(os.path.join(src, "examples", "*.mlir")))
    lit_tests = sorted(glob.glob(os.path.join(src, "tests", "lit", "**",
                                              "*.mlir"), recursive=True))
    pieces = []  # (name, text) of every example spec alone
    for path in examples:
        with open(path, encoding="utf-8", errors="replace") as f:
            specs = SPEC.split(f.read())
        for i, spec in enumerate(specs[1:]):
            pieces.append(("%s.spec%d" % (relname(path, src), i), "delta.spec " + spec))
    for name, text in pieces:
        writer.add(name + ".mlir", text)
    for path in lit_tests:
        with open(path, encoding="utf-8", errors="replace") as f:
            chunks = SPLIT.split(f.read())
        for i, chunk in enumerate(chunks):
            writer.add("%s.%d.mlir" % (relname(path, src), i), chunk)

    docs = sorted(glob.glob(os.path.join(src, "dialect", "*.td")) +
                  glob.glob(os.path.join(src, "docs", "**", "*.md"),
                            recursive=True))
    for path in docs:
        with open(path, encoding="utf-8", errors="replace") as f:
            blocks = FENCE.findall(f.read())
        for i, block in enumerate(blocks):
            writer.add("%s.block%d.mlir" % (relname(path, src), i), block)

    if args.deltac_opt and os.path.exists(args.deltac_opt):
        import tempfile
        for name, text in pieces:
            with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as tmp:
                tmp.write(text)
            path = tmp.name
            for stage, (pipeline, generic) in PIPELINES.items():
                cmd = [args.deltac_opt, path]
                if pipeline:
                    cmd.append("--pass-pipeline=builtin.module(%s)" % pipeline)
                if generic:
                    cmd.append("--mlir-print-op-generic")
                result = subprocess.run(cmd, capture_output=True, text=True)
                if result.returncode != 0:
                    # A seed is a convenience; say so and go on.
                    sys.stderr.write("make_corpus: %s failed on %s:\n%s" %
                                     (stage, name, result.stderr))
                    continue
                writer.add("%s.%s.mlir" % (name, stage), result.stdout)
            os.unlink(path)

    print("make_corpus: wrote %d seeds to %s" % (writer.count, args.out))
    return 0 if writer.count else 1


if __name__ == "__main__":
    sys.exit(main())
