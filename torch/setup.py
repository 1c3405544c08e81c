"""Builds picoll_torch, picoll's PyTorch process group, against the torch that is installed.

    PICOLL_TORCH_DIR=/path/to/picoll-prefix-or-build-dir pip install ./torch

PICOLL_TORCH_DIR is picoll's install prefix (lib/libpicoll.so, include/picoll.h) or a build
directory (.libs/libpicoll.so); without it, pkg-config's picoll.pc. The MPI is the one picoll was built
with (its mpicc, recorded in the build or in picoll.pc), or MPICC when set.
"""
import os
import re
import shlex
import subprocess
import sys

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    sys.exit("picoll_torch: " + msg)


def makefile_var(makefile, name):
    with open(makefile) as f:
        for line in f:
            m = re.match(r"^%s\s*=\s*(.*)$" % re.escape(name), line)
            if m:
                return m.group(1).strip()
    return None


def find_picoll():
    """(libdir, includedir, mpicc or None)"""
    top = os.environ.get("PICOLL_TORCH_DIR")
    if top:
        top = os.path.abspath(top)
        if os.path.exists(os.path.join(top, ".libs", "libpicoll.so")):  # a build directory
            src = makefile_var(os.path.join(top, "Makefile"), "abs_top_srcdir") or top
            return (os.path.join(top, ".libs"), os.path.join(os.path.normpath(src), "include"),
                    makefile_var(os.path.join(top, "Makefile"), "MPICC"))
        for lib in ("lib", "lib64"):
            if os.path.exists(os.path.join(top, lib, "libpicoll.so")):
                pc = os.path.join(top, lib, "pkgconfig", "picoll.pc")
                mpicc = None
                if os.path.exists(pc):
                    mpicc = makefile_var(pc, "mpicc")
                return os.path.join(top, lib), os.path.join(top, "include"), mpicc
        fail("PICOLL_TORCH_DIR=%s holds neither lib/libpicoll.so nor .libs/libpicoll.so" % top)
    try:
        def pc(*args):
            return subprocess.check_output(["pkg-config"] + list(args) + ["picoll"],
                                           text=True).strip()
        return pc("--variable=libdir"), pc("--variable=includedir"), pc("--variable=mpicc") or None
    except (OSError, subprocess.CalledProcessError):
        fail("cannot find picoll: set PICOLL_TORCH_DIR to its install prefix or build directory, "
             "or put its picoll.pc on PKG_CONFIG_PATH")


def mpi_flags(mpicc):
    """(include dirs, library dirs, libraries) of the MPI behind mpicc (Open MPI or MPICH)"""
    words = []
    for opts in (["--showme:compile", "--showme:link"], ["-compile_info", "-link_info"]):
        try:
            words = []
            for o in opts:
                words += shlex.split(subprocess.check_output([mpicc, o], text=True,
                                                             stderr=subprocess.DEVNULL))
            break
        except (OSError, subprocess.CalledProcessError):
            words = None
    if words is None:
        fail("cannot ask %s for the MPI's flags (set MPICC to the mpicc picoll was built with)"
             % mpicc)
    inc = [w[2:] for w in words if w.startswith("-I")]
    libdirs = [w[2:] for w in words if w.startswith("-L")]
    libs = [w[2:] for w in words if w.startswith("-l")]
    return inc, libdirs, libs


libdir, incdir, built_mpicc = find_picoll()
mpicc = os.environ.get("MPICC") or built_mpicc or "mpicc"
mpi_inc, mpi_libdirs, mpi_libs = mpi_flags(mpicc)

# where the package finds libpicoll.so at run time (loaded before the extension, RTLD_GLOBAL)
with open(os.path.join(HERE, "picoll_torch", "_paths.py"), "w") as f:
    f.write("# written by setup.py\nLIBPICOLL = %r\nMPICC = %r\n"
            % (os.path.join(libdir, "libpicoll.so"), mpicc))

setup(
    name="picoll_torch",
    version="0.1.0",
    description="picoll's PyTorch process group (backend 'picoll')",
    packages=["picoll_torch"],
    ext_modules=[CppExtension(
        "picoll_torch._C",
        sources=["csrc/picoll_torch.cpp", "csrc/ops.cpp", "csrc/bench.cpp"],
        include_dirs=[incdir] + mpi_inc,
        library_dirs=[libdir] + mpi_libdirs,
        # libpicoll before the MPI: its MPI_* wrappers are the ones the extension calls
        libraries=["picoll"] + mpi_libs,
        extra_link_args=["-Wl,-rpath," + d for d in [libdir] + mpi_libdirs],
        # the C API only: mpi.h would pull in the MPI's deprecated C++ bindings
        define_macros=[("OMPI_SKIP_MPICXX", "1"), ("MPICH_SKIP_MPICXX", "1")],
        # -g0: no debug information for torch's headers (the build: 63 against 90 CPU seconds on
        # the 2-core test machine, 2026-11-28)
        extra_compile_args=["-O2", "-g0", "-Wall", "-fvisibility=hidden"],
    )],
    cmdclass={"build_ext": BuildExtension},
)
