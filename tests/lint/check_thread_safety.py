#!/usr/bin/env python3
"""Compiles Chorus's sources with clang's thread-safety analysis, its warnings as errors.

    check_thread_safety.py CLANGXX BUILD_DIR SRC_DIR [SOURCE...]

Each source of the library (SRC_DIR, without the CUDA kernels and the LibTorch adapter,
whose headers clang does not take) is compiled as the build compiles it
(BUILD_DIR/compile_commands.json), by CLANGXX with -fsyntax-only -Wthread-safety: a member
marked CHORUS_GUARDED_BY read without its mutex, or a function marked CHORUS_REQUIRES called
without it, fails the check (base/thread_annotations.h). SOURCE files given instead are
compiled with the library's flags (the fixture that the check must refuse).
"""
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def flags_of(entry):
    """The entry's preprocessor and language flags, without compiler, output or input."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    keep, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a in ("-o", "-c"):
            skip = True
        elif a.startswith(("-I", "-D", "-std=", "-isystem")) or keep and keep[-1] == "-isystem":
            keep.append(a)
    return keep


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    clang, build, src = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]).resolve()
    entries = json.loads((build / "compile_commands.json").read_text())
    library = [e for e in entries if Path(e["file"]).resolve().is_relative_to(src)
               and e["file"].endswith(".cc") and not Path(e["file"]).resolve().is_relative_to(
                   src / "torch")]
    if not library:
        sys.exit(f"check_thread_safety: no library source in {build}/compile_commands.json")
    flags = flags_of(library[0])
    jobs = [(f, flags) for f in sys.argv[4:]] or [(e["file"], flags_of(e)) for e in library]
    def check(job):
        source, fl = job
        cmd = [clang, "-fsyntax-only", "-Wno-everything", "-Wthread-safety",
               "-Werror=thread-safety", *fl, source]
        return subprocess.run(cmd, capture_output=True, text=True)

    failed = 0
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        for run in pool.map(check, jobs):
            if run.returncode != 0:
                failed += 1
                sys.stderr.write(run.stderr)
    print(f"check_thread_safety: {len(jobs) - failed} of {len(jobs)} sources pass")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
