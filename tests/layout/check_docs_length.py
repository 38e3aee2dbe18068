#!/usr/bin/env python3
"""docs/PERFORMANCE.md stays a reference: at most 400 lines.

It holds the current table per GPU and shape, one row per kernel form and
how to reproduce; dated runs, A/Bs and dead ends go to
docs/performance-journal.md. A longer file fails here, naming its length.
"""
import pathlib
import sys

LIMIT = 400


def main(root):
    path = pathlib.Path(root) / "docs" / "PERFORMANCE.md"
    lines = len(path.read_text().splitlines())
    if lines > LIMIT:
        print(f"{path}: {lines} lines, more than {LIMIT}: move dated entries to "
              "docs/performance-journal.md")
        return 1
    print(f"PERFORMANCE.md: {lines} lines, at most {LIMIT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
