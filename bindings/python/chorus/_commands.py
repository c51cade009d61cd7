"""The commands a pip install of chorus puts on PATH: chorusrun and chorus-trace.

Each runs the program of that name inside this package (chorus/bin/), built with the package,
so that a virtualenv has the launcher and the trace tool that match its chorus.torch.
"""

import os
import sys


def _run(name):
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
    if not os.access(program, os.X_OK):
        sys.exit(f"{name}: {program} is missing: this chorus package was not installed by pip; "
                 f"use the {name} of the Chorus install it came from")
    os.execv(program, [name] + sys.argv[1:])


def chorusrun():
    _run("chorusrun")


def chorus_trace():
    _run("chorus-trace")
