#!/usr/bin/env python3
"""Checks that every #include under SRC goes down Chorus's layers (docs/architecture.md):
a file in src/<layer>/ may include its own layer's headers and those of the layers listed
for it in LAYERS, nothing else of src/, and every folder of SRC is a layer. LAYERS is the
build's layers.txt, which src/CMakeLists.txt writes from the arrows it declares (and
compiles each layer with: this check also covers the headers no layer compiles). Usage:
check_layers.py SRC_DIR LAYERS. Prints each include that goes up or sideways and exits 1 if
there is any."""

import pathlib
import re
import sys

# Each layer and the layers under it that it may include, bottom first.
def read_layers(path):
    """{layer: set of the layers below it} from lines "layer: below below"."""
    layers = {}
    for line in pathlib.Path(path).read_text().splitlines():
        if line.strip():
            name, _, below = line.partition(":")
            layers[name.strip()] = set(below.split())
    return layers

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/')


def main():
    src = pathlib.Path(sys.argv[1])
    allowed = read_layers(sys.argv[2])
    bad = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cc", ".cu") or not path.is_file():
            continue
        layer = path.relative_to(src).parts[0]
        if layer not in allowed:
            bad.append(f"{path}: folder '{layer}' is not a layer of the design")
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) not in allowed or m.group(1) == layer:
                continue
            if m.group(1) not in allowed[layer]:
                bad.append(f"{path}:{n}: layer '{layer}' includes '{m.group(1)}', "
                           f"which is not below it: {line.strip()}")
    for b in bad:
        print(b)
    print(f"check_layers: {len(bad)} include(s) against the layers" if bad else
          "check_layers: every include goes down the layers")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
