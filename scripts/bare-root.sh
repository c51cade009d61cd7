# Sourced by the rehearsals (scripts/gpu-check-rehearsal.sh, scripts/site-rehearsal.sh):
# bare_root NAME INCLUDES sets root_tar to a tarball of a bare Debian bookworm root made by
# mmdebstrap's apt variant plus INCLUDES (comma-separated packages), cached in
# CHORUS_REHEARSAL_CACHE (default /var/cache/chorus) under NAME and a hash of INCLUDES, so
# that only the first run downloads it. Calls the caller's `skip REASON` when no root can be
# made here.
bare_root() {
  local name=$1 includes=$2 cache part
  cache=${CHORUS_REHEARSAL_CACHE:-/var/cache/chorus}
  root_tar=$cache/$name-bookworm-$(echo "$includes" | md5sum | cut -c1-8).tar
  [[ -f $root_tar ]] && return 0
  command -v mmdebstrap >/dev/null || skip "no mmdebstrap (Debian package mmdebstrap) to make the root"
  mkdir -p "$cache"
  echo "$name: making the bare root $root_tar (once)"
  # mmdebstrap writes a tarball when the name ends in .tar.
  part=${root_tar%.tar}.part.tar
  if ! mmdebstrap --quiet --variant=apt --include="$includes" bookworm "$part"; then
    rm -f "$part"
    skip "mmdebstrap could not make the root (is a Debian mirror reachable?)"
  fi
  mv "$part" "$root_tar"
}
