#!/usr/bin/env python3
"""Checks that every #include under SRC goes down Chorus's layers (the README's Layout):
a file in src/<layer>/ may include its own layer's headers and those of the layers listed
for it in ALLOWED, nothing else of src/. Usage: check_layers.py SRC_DIR. Prints each
include that goes up or sideways and exits 1 if there is any."""

import pathlib
import re
import sys

# Each layer and the layers under it that it may include, bottom first.
ALLOWED = {
    "base": set(),
    "kernels": {"base"},
    "transport": {"base"},
    "timeline": {"base"},
    "topology": {"base", "transport"},
    "collectives": {"base", "kernels", "transport", "topology"},
    "fusion": {"base", "kernels"},
    "core": {"base", "kernels", "transport", "timeline", "topology", "collectives", "fusion"},
    # The LibTorch adapter sees the public API only (include/chorus/).
    "torch": set(),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/')


def main():
    src = pathlib.Path(sys.argv[1])
    bad = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cc", ".cu") or not path.is_file():
            continue
        layer = path.relative_to(src).parts[0]
        if layer not in ALLOWED:
            bad.append(f"{path}: folder '{layer}' is not a layer of the design")
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) not in ALLOWED or m.group(1) == layer:
                continue
            if m.group(1) not in ALLOWED[layer]:
                bad.append(f"{path}:{n}: layer '{layer}' includes '{m.group(1)}', "
                           f"which is not below it: {line.strip()}")
    for b in bad:
        print(b)
    print(f"check_layers: {len(bad)} include(s) against the layers" if bad else
          "check_layers: every include goes down the layers")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
