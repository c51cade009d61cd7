"""pip path for the Python package chorus (chorus.torch).

`pip install --no-build-isolation ./bindings/python` configures the whole Chorus project with
CMake for the Python running pip (so against the torch it imports), builds the core, the
LibTorch adapter and the module chorus._ext, and installs the package with libchorus and
libchorus_torch inside it (found through RPATH $ORIGIN). Environment:
  CHORUS_CMAKE_ARGS   extra configure arguments, e.g. "-DCHORUS_WITH_CUDA=OFF"
  CHORUS_BUILD_JOBS   parallel build jobs (default 2)
  CHORUS_BUILD_DIR    reuse this build directory instead of a temporary one
"""

import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("CHORUS_BUILD_DIR") or tempfile.mkdtemp(prefix="chorus-pip-")
        stage = os.path.join(build, "pip-stage")
        shutil.rmtree(stage, ignore_errors=True)
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        configure = ["cmake", "-S", ROOT, "-B", build, *generator,
                     "-DCMAKE_BUILD_TYPE=Release",
                     f"-DCHORUS_PYTHON_EXECUTABLE={sys.executable}",
                     "-DCHORUS_WITH_PYTHON=ON", "-DCHORUS_PYTHON_WHEEL=ON",
                     "-DCHORUS_BUILD_TESTS=OFF", "-DCHORUS_BUILD_BENCH=OFF",
                     "-DCHORUS_BUILD_EXAMPLES=OFF",
                     *shlex.split(os.environ.get("CHORUS_CMAKE_ARGS", ""))]
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", build, "--target", "chorus_python", "-j",
                               os.environ.get("CHORUS_BUILD_JOBS", "2")])
        subprocess.check_call(["cmake", "--install", build, "--component", "chorus_python",
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


setup(
    name="chorus",
    version="0.1.0",
    description="Collective communication for data-parallel training (horovod.torch API)",
    python_requires=">=3.9",
    packages=[],
    ext_modules=[Extension("chorus._ext", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
