"""What the GPU's Python tests (test_python, test_compile, test_fla_backend)
share: the record of named checks, and the CUDA kernels a call launches.

Checks.check prints a PASS / FAIL line as each check is made, ending with
the seconds since the start (a run must stay well inside the device's 10
minutes a command: the log shows where the time goes); Checks.summary
writes every result to a file and prints the failures and, last, the line
`== <title>: N checks, M failed ==` that tests/gpu/run.sh greps.
"""
import time

import torch


class Checks:
    def __init__(self):
        self.results = []  # (name, ok, detail)
        self.start = time.monotonic()

    def check(self, name, ok, detail=""):
        ok = bool(ok)
        self.results.append((name, ok, detail))
        print(f"{'PASS' if ok else 'FAIL'} {name:60s} {detail} "
              f"[{time.monotonic() - self.start:.0f} s]", flush=True)
        return ok

    def guarded(self, name, fn):
        """Runs fn (which makes its own checks); an exception fails `name`."""
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            self.check(name, False, f"{type(e).__name__}: {str(e)[:300]}")

    def raises(self, name, fn, text):
        """Checks that fn raises ValueError mentioning `text`."""
        label = f"ValueError: {name}"
        try:
            fn()
        except ValueError as e:
            self.check(label, text in str(e), str(e)[:90])
            return
        except Exception as e:  # noqa: BLE001 - the wrong error fails the check
            self.check(label, False, f"raised {type(e).__name__}: {e}")
            return
        self.check(label, False, "no error")

    def summary(self, title, path):
        """Writes the results to `path` (a PASS / FAIL line each), prints the
        failures and the summary line; returns the exit status (1 on any
        failure)."""
        failed = [r for r in self.results if not r[1]]
        with open(path, "w") as fh:
            fh.writelines(f"{'PASS' if ok else 'FAIL'}\t{n}\t{d}\n" for n, ok, d in self.results)
        for name, _, detail in failed:
            print(f"  FAILED {name}: {detail}")
        print(f"\n== {title}: {len(self.results)} checks, {len(failed)} failed ==", flush=True)
        return 1 if failed else 0


def kernels_launched(call):
    """The CUDA kernels (and memcpy / memset) the profiler sees during
    call(), in launch order; call() runs once before, so first-call work
    (module loading, allocation) is not counted."""
    call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
