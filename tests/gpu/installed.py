"""Which copy of the example library the GPU's Python tests import.

gdn_module(root, build) -> (module, its deltac_torch, module name):
  - by default generated/gdn/gdn.py (the source tree's runtime) with
    build/gdn/libgdn.so ($DELTAC_GDN_LIB);
  - with DELTAC_GDN_PACKAGE=deltac_gdn, the package installed from the
    library's wheel (tests/gpu/run.sh test-wheel): its own deltac_torch and
    the libgdn.so inside it. That it came from outside the source tree and
    loads its own shared library is checked here, so a test that passes
    tested the wheel.
"""
import importlib
import os
import sys


def gdn_module(root, build):
    package = os.environ.get("DELTAC_GDN_PACKAGE", "")
    if not package:
        sys.path.insert(0, os.path.join(root, "generated", "gdn"))
        os.environ["DELTAC_GDN_LIB"] = os.path.join(build, "gdn", "libgdn.so")
        module = importlib.import_module("gdn")
        return module, importlib.import_module("deltac_torch"), "gdn"
    os.environ.pop("DELTAC_GDN_LIB", None)
    module = importlib.import_module(package)
    where = os.path.dirname(os.path.abspath(module.__file__))
    if where.startswith(os.path.abspath(root) + os.sep):
        sys.exit(f"{package} was imported from the source tree ({where}), not its wheel")
    lib = module.load()
    if os.path.dirname(os.path.abspath(lib._name)) != where:
        sys.exit(f"{package} loaded {lib._name}, not the library inside its package")
    print(f"{package}: the installed wheel at {where}", flush=True)
    return module, importlib.import_module(package + ".deltac_torch"), package
