#!/usr/bin/env python3
"""Puts software into a bare root the way a cluster provides it: each module in its own prefix
under /opt, exposed only through an Lmod modulefile, none of it in /usr.

    make_prefixes.py ROOTFS

The files come from the Debian packages installed on this machine (so nothing is
downloaded): for each module below, its packages and everything they depend on that the root
does not have are copied under /opt/<name>/<version>/ with their /usr paths kept; links that
Debian makes at install time (update-alternatives: mpicc, mpirun, libblas.so.3) are made
inside the prefix; pkg-config files are pointed at the prefix. Each modulefile sets what a
site's would: PATH, LD_LIBRARY_PATH, CPATH, PKG_CONFIG_PATH, CMAKE_PREFIX_PATH, PYTHONPATH.
"""

import os
import re
import shutil
import subprocess
import sys

ARCH = "x86_64-linux-gnu"
LIB = f"usr/lib/{ARCH}"

# name, version, top packages, extra environment (paths relative to the prefix)
MODULES = [
    ("openmpi", "4.1", ["libopenmpi-dev", "openmpi-bin"],
     # Debian's Open MPI and PMIx, moved from /usr, are told where they are now (a site's own
     # build knows its prefix).
     {"setenv": {"OPAL_PREFIX": "usr", "PMIX_PREFIX": f"{LIB}/pmix2",
                 "PMIX_INSTALL_PREFIX": f"{LIB}/pmix2", "PMIX_PKGLIBDIR": f"{LIB}/pmix2/lib/pmix"},
      "LD_LIBRARY_PATH": [f"{LIB}/openmpi/lib"]}),
    ("hwloc", "2.9", ["libhwloc-dev"], {}),
    ("spdlog", "1.10", ["libspdlog-dev"], {}),
    ("pybind11", "2.10", ["pybind11-dev"], {}),
    ("torch", "1.13", ["libtorch-dev", "python3-torch"],
     {"PYTHONPATH": ["usr/lib/python3/dist-packages"]}),
]


def parse_status(path):
    """Installed packages of a dpkg status file: name -> fields."""
    packages = {}
    with open(path, encoding="utf-8") as f:
        for block in f.read().split("\n\n"):
            fields = {}
            key = None
            for line in block.splitlines():
                if line.startswith((" ", "\t")) and key:
                    fields[key] += " " + line.strip()
                elif ":" in line:
                    key, _, value = line.partition(":")
                    fields[key] = value.strip()
            if fields.get("Status", "").endswith(" installed"):
                packages[fields["Package"]] = fields
    return packages


def closure(tops, installed, have):
    """The installed packages that tops need, by Depends and Pre-Depends, less those in have."""
    provides = {}
    for name, fields in installed.items():
        for p in re.split(r"\s*,\s*", fields.get("Provides", "")):
            if p:
                provides.setdefault(p.split()[0], name)
    out, todo = set(), list(tops)
    while todo:
        name = todo.pop()
        name = name if name in installed else provides.get(name)
        if not name or name in out or name in have:
            continue
        out.add(name)
        deps = installed[name].get("Pre-Depends", "") + "," + installed[name].get("Depends", "")
        for dep in re.split(r"\s*,\s*", deps):
            choices = [c.strip().split()[0].split(":")[0] for c in dep.split("|") if c.strip()]
            chosen = next((c for c in choices if c in installed or c in provides), None)
            if chosen and not any(c in have for c in choices):
                todo.append(chosen)
    return out


def package_files(name):
    for list_file in (f"/var/lib/dpkg/info/{name}:amd64.list", f"/var/lib/dpkg/info/{name}.list"):
        if os.path.exists(list_file):
            with open(list_file, encoding="utf-8") as f:
                return [line.rstrip("\n") for line in f if line.strip()]
    raise SystemExit(f"make_prefixes: no file list for {name}")


def alternatives():
    """(link, value) of every alternative and its slaves on this machine."""
    names = subprocess.run(["update-alternatives", "--get-selections"], capture_output=True,
                           text=True, check=True).stdout.split()[::3]
    pairs = []
    for name in names:
        query = subprocess.run(["update-alternatives", "--query", name], capture_output=True,
                               text=True, check=True).stdout
        value = re.search(r"^Value: (.*)$", query, re.M)
        if not value:
            continue
        master = re.search(r"^Link: (.*)$", query, re.M).group(1)
        pairs.append((master, value.group(1)))
        block = re.search(r"^Alternative: " + re.escape(value.group(1)) + r"$(.*?)(?:\n\n|\Z)",
                          query, re.M | re.S)
        slaves = {}
        if block:
            slaves = dict(re.findall(r"^ (\S+) (\S+)$", block.group(1), re.M))
        links = dict(re.findall(r"^ (\S+) (/\S+)$", query.split("\n\n")[0], re.M))
        for slave_name, slave_link in links.items():
            if slave_name in slaves:
                pairs.append((slave_link, slaves[slave_name]))
    return pairs


def relink(prefix, path, target):
    """Makes prefix+path a relative link to prefix+target."""
    dst = prefix + path
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst):
        os.remove(dst)
    os.symlink(os.path.relpath(prefix + target, os.path.dirname(dst)), dst)


def fill(rootfs, where, files, alts):
    """Copies files into rootfs+where, with the alternatives' links, pkg-config files fixed."""
    prefix = rootfs + where
    # /usr only, as a prefix holds it: /lib, /bin and /sbin are /usr's on a merged-/usr
    # system (a package may still list /lib/...); /etc and /var stay the root's.
    files = [("/usr" + f if f.startswith(("/lib/", "/lib64/", "/bin/", "/sbin/")) else f)
             for f in files]
    owned = set(files)
    for path in files:
        if not path.startswith("/usr/") or path.startswith(
                ("/usr/share/doc", "/usr/share/man", "/usr/share/lintian")):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            continue
        if not os.path.lexists(path):
            continue
        dst = prefix + path
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.islink(path) and os.path.isabs(os.readlink(path)):
            real = os.path.realpath(path)
            if real in owned:
                relink(prefix, path, real)
            else:
                shutil.copy2(real, dst)
        else:
            shutil.copy2(path, dst, follow_symlinks=False)
    for link, value in alts:
        if value in owned and not os.path.lexists(prefix + link):
            relink(prefix, link, value)
    # pkg-config files name the prefix they were built for.
    for dirpath, _, names in os.walk(prefix):
        for name in names:
            if name.endswith(".pc") and not os.path.islink(os.path.join(dirpath, name)):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                text = re.sub(r"(=|-I|-L)/usr(?=/|$|\s)", lambda m: m.group(1) + where + "/usr",
                              text, flags=re.M)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)


def modulefile(path, name, version, where, extra):
    lines = [f"-- {name} {version}, as a site provides it: its own prefix, this module only.",
             f'whatis("Name: {name}")', f'local prefix = "{where}"']
    env = {
        "PATH": ["usr/bin"],
        "LD_LIBRARY_PATH": [LIB, "usr/lib"] + extra.get("LD_LIBRARY_PATH", []),
        "CPATH": ["usr/include", f"usr/include/{ARCH}"],
        "PKG_CONFIG_PATH": [f"{LIB}/pkgconfig", "usr/share/pkgconfig"],
        "CMAKE_PREFIX_PATH": ["usr"],
        "PYTHONPATH": extra.get("PYTHONPATH", []),
    }
    for var, subdirs in env.items():
        for sub in subdirs:
            lines.append(f'prepend_path("{var}", pathJoin(prefix, "{sub}"))')
    for var, sub in extra.get("setenv", {}).items():
        lines.append(f'setenv("{var}", pathJoin(prefix, "{sub}"))')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    rootfs = os.path.abspath(sys.argv[1])
    installed = parse_status("/var/lib/dpkg/status")
    have = set(parse_status(os.path.join(rootfs, "var/lib/dpkg/status")))
    alts = alternatives()
    for name, version, tops, extra in MODULES:
        missing = [t for t in tops if t not in installed]
        if missing:
            raise SystemExit(f"make_prefixes: {', '.join(missing)} not installed here "
                             "(scripts/install-deps.sh)")
        where = f"/opt/{name}/{version}"
        packages = sorted(closure(tops, installed, have))
        files = [f for p in packages for f in package_files(p)]
        fill(rootfs, where, files, alts)
        modulefile(f"{rootfs}/opt/modulefiles/{name}/{version}.lua", name, version, where, extra)
        print(f"make_prefixes: {name}/{version}: {len(packages)} packages in {where}")


if __name__ == "__main__":
    main()
