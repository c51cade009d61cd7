"""pip path for the Python package chorus (chorus.torch).

`pip install --no-build-isolation ./bindings/python` configures the whole Chorus project with
CMake for the Python running pip (so against the torch it imports), builds the core, the
LibTorch adapter, the module chorus._ext, chorusrun and chorus-trace, and installs one
self-contained package: the libraries inside it (found through RPATH $ORIGIN) and the two
programs under chorus/bin/, which the commands `chorusrun` and `chorus-trace` run.
Environment:
  CHORUS_CMAKE_ARGS   extra configure arguments, e.g. "-DCHORUS_WITH_CUDA=OFF"
  CHORUS_BUILD_JOBS   parallel build jobs (default 2)
  CHORUS_BUILD_DIR    build here instead of in a temporary directory; a directory configured
                      before keeps its settings (CHORUS_CMAKE_ARGS, if any, are applied to it)
"""

import atexit
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def chorus_version():
    """The project's version, from the project() call of the top CMakeLists.txt."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(Chorus VERSION ([0-9.]+)", f.read()).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("CHORUS_BUILD_DIR")
        if not build:
            build = tempfile.mkdtemp(prefix="chorus-pip-")
            atexit.register(shutil.rmtree, build, True)
        stage = tempfile.mkdtemp(prefix="chorus-pip-stage-")
        extra = shlex.split(os.environ.get("CHORUS_CMAKE_ARGS", ""))
        configure = None
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            configure = ["cmake", "-S", ROOT, "-B", build, *generator,
                         "-DCMAKE_BUILD_TYPE=Release",
                         f"-DCHORUS_PYTHON_EXECUTABLE={sys.executable}",
                         "-DCHORUS_WITH_PYTHON=ON",
                         "-DCHORUS_BUILD_TESTS=OFF", "-DCHORUS_BUILD_BENCH=OFF",
                         "-DCHORUS_BUILD_EXAMPLES=OFF", *extra]
        elif extra:
            configure = ["cmake", "-S", ROOT, "-B", build, *extra]
        if configure:
            subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", build, "--target", "chorus_python", "chorusrun",
                               "chorus-trace", "chorus-check-job",
                               "-j", os.environ.get("CHORUS_BUILD_JOBS", "2")])
        subprocess.check_call(["cmake", "--install", build, "--component", "chorus_wheel",
                               "--prefix", stage])
        # Copy the staged package; shared libraries under their SONAME only (libchorus.so.0).
        src = os.path.join(stage, "chorus")
        dst = os.path.join(os.path.abspath(self.build_lib), "chorus")
        for dirpath, _, files in os.walk(src):
            out = os.path.join(dst, os.path.relpath(dirpath, src))
            os.makedirs(out, exist_ok=True)
            for f in files:
                path = os.path.join(dirpath, f)
                if ".so." in f and not os.path.islink(path):
                    continue  # the fully versioned file; its SONAME link is copied instead
                shutil.copyfile(path, os.path.join(out, f))  # follows the SONAME link
                shutil.copymode(path, os.path.join(out, f))
        shutil.rmtree(stage, ignore_errors=True)


# setuptools' own files (build/, chorus.egg-info) go to a temporary directory, so that an
# install leaves the source tree as it was (pip builds in place).
SCRATCH = tempfile.mkdtemp(prefix="chorus-setuptools-")
atexit.register(shutil.rmtree, SCRATCH, True)

setup(
    name="chorus",
    version=chorus_version(),
    description="Collective communication for data-parallel training (horovod.torch API)",
    python_requires=">=3.9",
    packages=[],
    ext_modules=[Extension("chorus._ext", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    entry_points={"console_scripts": ["chorusrun = chorus._commands:chorusrun",
                                      "chorus-trace = chorus._commands:chorus_trace"]},
    zip_safe=False,
    options={"build": {"build_base": os.path.join(SCRATCH, "build")},
             "egg_info": {"egg_base": SCRATCH}},
)
