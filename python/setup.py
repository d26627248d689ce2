"""Builds libmtac (the operator library of the repository this directory is in) with CMake and
puts it inside the `mtac` package, which reaches it through ctypes (mtac/_lib.py).

    pip install --no-build-isolation ./python

CMake runs on the repository root with -DMTAC_LIBRARY_ONLY=ON (no CLI, so no cJSON, libpng or
cmocka; with nvcc, the CUDA backend's module libmtac_cuda.so too, for CUDA tensors), in MTAC_CMAKE_BUILD_DIR when set (kept between installs), else in python/build/cmake.
CMAKE_BUILD_PARALLEL_LEVEL sets the build's jobs as usual. The library is built for this machine's
CPU (-march=native, like the rest of mtac); pass -DMTAC_NATIVE=OFF through MTAC_CMAKE_ARGS
(space-separated) for a portable AVX2 build.
"""
import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup


def _check_wheel():
    """pip builds a wheel (bdist_wheel), which setuptools before 70.1 takes from the `wheel`
    package. A venv of a python other than Debian's (pyenv, conda) sees neither Debian's
    python3-wheel nor its python3-torch, and pip would fail with "invalid command 'bdist_wheel'"."""
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1)
        return
    except ImportError:
        pass
    try:
        import wheel  # noqa: F401
    except ImportError:
        sys.exit('mtac: this python (%s) cannot import the `wheel` package, which pip needs to build the '
                 'package ("invalid command \'bdist_wheel\'"). It is probably not Debian\'s python (pyenv, '
                 'conda): create the venv with Debian\'s, which sees python3-wheel and python3-torch:\n'
                 '    /usr/bin/python3 -m venv --system-site-packages .venv\n'
                 '    .venv/bin/pip install --no-build-isolation ./python\n'
                 '(or install wheel, setuptools and torch into this python yourself)' % sys.executable)


# pip's metadata step (dist_info) already asks for bdist_wheel; only an sdist goes without.
if not set(sys.argv[1:2]) & {'sdist', 'egg_info', 'clean', '--help'}:
    _check_wheel()
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class BuildPyWithLibmtac(build_py):
    def run(self):
        super().run()
        if not os.path.isfile(os.path.join(ROOT, 'include', 'mta.h')):
            raise RuntimeError('mtac: %s is not the mtac repository (no include/mta.h): build the package '
                               'from the repository, pip install ./python' % ROOT)
        build = os.environ.get('MTAC_CMAKE_BUILD_DIR') or os.path.join(HERE, 'build', 'cmake')
        args = os.environ.get('MTAC_CMAKE_ARGS', '').split()
        # The library is copied out of the build tree, so it gets the run path of an installed one:
        # a build tree's is padded with ':' for CMake's install-time rewrite, and that empty entry
        # made the loader search the current directory (for libmtac_cuda.so, among others).
        subprocess.check_call(['cmake', '-S', ROOT, '-B', build, '-DCMAKE_BUILD_TYPE=Release',
                               '-DMTAC_LIBRARY_ONLY=ON', '-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON'] + args,
                              stdout=subprocess.DEVNULL)
        subprocess.check_call(['cmake', '--build', build, '--target', 'mtac_shared'])
        libs = ['libmtac.so']
        # The CUDA backend's module (CUDA tensors), where CMake found nvcc: libmtac opens it from
        # its own directory, so it goes beside it.
        targets = subprocess.run(['cmake', '--build', build, '--target', 'help'], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True).stdout
        if any(line.split(':')[0].strip(' .') == 'mtac_cuda' for line in targets.splitlines()):
            subprocess.check_call(['cmake', '--build', build, '--target', 'mtac_cuda'])
            libs.append('libmtac_cuda.so')
        dest = os.path.join(self.build_lib, 'mtac')
        os.makedirs(dest, exist_ok=True)
        for name in libs:
            shutil.copyfile(os.path.realpath(os.path.join(build, name)), os.path.join(dest, name))


class BinaryDistribution(Distribution):
    """The package holds a compiled library: its wheel is for this platform only."""

    def has_ext_modules(self):
        return True


setup(cmdclass={'build_py': BuildPyWithLibmtac}, distclass=BinaryDistribution)
