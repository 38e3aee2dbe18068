"""Builds the Python wheel of a generated library and checks what is in it.

    check_wheel.py LIBRARY_DIR RUNTIME_DIR WORK_DIR [--keep WHEELHOUSE]

Copies the library folder and its runtime into WORK_DIR (the wheel is built
from a copy: the checked-in folder stays clean), builds it with the
standard tools and no network (`pip wheel --no-build-isolation --no-deps`,
scikit-build-core from the library's pyproject.toml), makes it a manylinux
wheel (`auditwheel repair`), and checks:
  - the name deltac_<lib>-<version>-py3-none-manylinux_*_x86_64.whl;
  - the files: the package deltac_<lib>/ with __init__.py (the library's
    module), deltac_torch.py, deltac_ops.py, deltac_fla.py and lib<lib>.so, nothing else
    outside the dist-info (so two libraries' wheels never clash);
  - the metadata: Requires-Python, Requires-Dist torch>=2.4;
  - the shared library: only glibc and libdl needed (libstdc++ static), and
    every kernel's fatbin holds SASS (an ELF image) for every target of the
    library's CMakeLists, beside the PTX;
  - a build told that ptxas is absent refuses (no PTX-only wheel).
--keep copies the repaired wheel to WHEELHOUSE (tests/gpu/run.sh installs
it on the GPU machine). Prints PASS/FAIL lines and a summary; exits 1 on a
failure.
"""
import glob
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile

FATBIN_MAGIC = 0xBA55ED50
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""), flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def fatbins(blob):
    """(kind, arch) lists of every fatbin embedded in blob (a shared
    library): kind 1 is PTX, 2 an ELF (SASS) image; arch 90 for sm_90a."""
    found = []
    start = 0
    magic = struct.pack("<I", FATBIN_MAGIC)
    while True:
        at = blob.find(magic, start)
        if at < 0:
            return found
        _, version, header, size = struct.unpack_from("<IHHQ", blob, at)
        entries, off = [], at + header
        while version == 1 and off < at + header + size:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", blob, off)
            arch = struct.unpack_from("<I", blob, off + 28)[0]
            entries.append((kind, arch))
            off += entry_header + payload
        found.append(entries)
        start = at + 4


def ptx_names(src):
    """The kernel files of a library: the kernels/ folder packed in
    kernels.tar.xz (as generated/ keeps them; it wins where both exist, as
    in the library's CMakeLists), else deltac's kernels/ folder."""
    archive = os.path.join(src, "kernels.tar.xz")
    if os.path.exists(archive):
        with tarfile.open(archive) as t:
            return {os.path.basename(n) for n in t.getnames() if n.endswith(".ptx")}
    return set(os.listdir(os.path.join(src, "kernels")))


def main():
    args = sys.argv[1:]
    keep = None
    if "--keep" in args:
        i = args.index("--keep")
        keep = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    lib_dir, runtime_dir, work = (os.path.abspath(a) for a in args)
    lib = os.path.basename(lib_dir.rstrip("/"))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    src = os.path.join(work, lib)
    shutil.copytree(lib_dir, src)
    shutil.copytree(runtime_dir, os.path.join(work, "runtime"))
    cmake = open(os.path.join(src, "CMakeLists.txt")).read()
    targets = re.search(rf"set\({lib}_TARGETS ([^)]*)\)", cmake).group(1).split()
    kernels = re.search(rf"set\({lib}_KERNELS ([^)]*)\)", cmake).group(1).split()

    dist = os.path.join(work, "dist")
    built = run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                 "--no-index", src, "-w", dist])
    wheels = glob.glob(os.path.join(dist, "*.whl"))
    check("pip wheel --no-build-isolation builds the wheel", built.returncode == 0 and
          len(wheels) == 1, (built.stdout + built.stderr)[-600:] if built.returncode else
          os.path.basename(wheels[0]))
    if not wheels:
        return finish()
    house = os.path.join(work, "wheelhouse")
    repaired = run([sys.executable, "-m", "auditwheel", "repair", wheels[0], "-w", house])
    fixed = glob.glob(os.path.join(house, "*.whl"))
    name = os.path.basename(fixed[0]) if fixed else ""
    check("auditwheel repair gives a manylinux x86_64 wheel",
          repaired.returncode == 0 and re.fullmatch(
              rf"deltac_{lib}-[0-9.]+-py3-none-manylinux_2_\d+_x86_64\.whl", name) is not None,
          name or repaired.stderr[-400:])
    if not fixed:
        return finish()

    with zipfile.ZipFile(fixed[0]) as z:
        names = z.namelist()
        package = sorted(n for n in names if ".dist-info/" not in n and not n.endswith("/"))
        want = sorted(f"deltac_{lib}/{f}" for f in
                      ("__init__.py", "deltac_torch.py", "deltac_ops.py", "deltac_fla.py",
                       f"lib{lib}.so"))
        check("the package deltac_<lib>/ holds the module, the runtime's Python files and "
              "the library, nothing else", package == want, str(package))
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        check("metadata: Requires-Python and Requires-Dist torch>=2.4",
              "Requires-Python: >=3.9" in meta and "Requires-Dist: torch>=2.4" in meta,
              " | ".join(l for l in meta.splitlines() if l.startswith("Requires")))
        init = z.read(f"deltac_{lib}/__init__.py").decode()
        check("__init__.py imports the runtime inside the package",
              "from .deltac_torch import Library" in init)
        so_path = os.path.join(work, f"lib{lib}.so")
        with open(so_path, "wb") as f:
            f.write(z.read(f"deltac_{lib}/lib{lib}.so"))

    needed = run(["objdump", "-p", so_path]).stdout
    libs = sorted(re.findall(r"NEEDED\s+(\S+)", needed))
    check("the library needs only glibc (libstdc++ linked statically)",
          all(re.fullmatch(r"(libc|libdl|libm|libpthread|ld-linux-x86-64)\.so\.\d+", n)
              for n in libs), str(libs))
    # A kernel's targets: those it has PTX for (prefill's queue: sm_90a).
    have = ptx_names(src)
    want = sorted(sorted({int(t[3:].rstrip("a")) for t in targets
                          if f"{k}.{t}.ptx" in have}) for k in kernels)
    images = fatbins(open(so_path, "rb").read())
    sass = sorted(sorted({a for k, a in e if k == 2}) for e in images)
    ptx = sorted(sorted({a for k, a in e if k == 1}) for e in images)
    check(f"every kernel's fatbin has SASS and PTX for each of its targets "
          f"({', '.join(targets)})", sass == want and ptx == want,
          f"{len(images)} fatbins for {len(kernels)} kernels")

    refused = run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                   "--no-index", src, "-w", os.path.join(work, "refused"),
                   "--config-settings=cmake.define.DELTAC_PTXAS=OFF"])
    text = refused.stdout + refused.stderr
    check("without ptxas the wheel build refuses (no PTX-only wheel)",
          refused.returncode != 0 and "refusing to build a PTX-only wheel" in text,
          "exit %d" % refused.returncode)
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(fixed[0], keep)
    return finish()


def finish():
    failed = results.count(False)
    print(f"== wheel checks: {len(results)} checks, {failed} failed ==")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
