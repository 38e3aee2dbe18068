#!/usr/bin/env python3
"""The C++ runtime reads exactly three environment variables.

Tuning lives in the plan and pass options; the runtime copied into every
generated library has one switch for forcing a prefill form
(DELTAC_PREFILL_FORCE) and the two documented in docs/host-api.md
(DELTAC_FORCE_TARGET, DELTAC_PDL). Every getenv in templates/runtime's C++
must name one of them by a string literal; a new one fails this check
until it is documented and added here.
"""
import pathlib
import re
import sys

ALLOWED = {"DELTAC_PREFILL_FORCE", "DELTAC_FORCE_TARGET", "DELTAC_PDL"}


def main(root):
    runtime = pathlib.Path(root) / "templates" / "runtime"
    found, errors = set(), []
    for path in sorted(runtime.iterdir()):
        if path.suffix not in (".cpp", ".h"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for call in re.finditer(r"\bgetenv\s*\(([^)]*)\)", line):
                literal = re.fullmatch(r'\s*"([A-Za-z0-9_]+)"\s*', call.group(1))
                where = f"{path.name}:{number}"
                if not literal:
                    errors.append(f"{where}: getenv of no string literal: {call.group(0)}")
                elif literal.group(1) not in ALLOWED:
                    errors.append(f"{where}: reads {literal.group(1)}, not one of "
                                  f"{', '.join(sorted(ALLOWED))}")
                else:
                    found.add(literal.group(1))
    missing = ALLOWED - found
    if missing:
        errors.append(f"no getenv of {', '.join(sorted(missing))} (update this check and the docs)")
    for e in errors:
        print(e)
    if errors:
        return 1
    print(f"the runtime reads exactly: {', '.join(sorted(found))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
