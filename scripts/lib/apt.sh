# Debian packages on demand, for scripts that need a tool the machine lacks
# (bootstrap.sh, test-under-load.sh). Source it, then `apt_install PACKAGE`.
# The caller defines `die MESSAGE` (and may set APT_LOG_PREFIX for apt's
# messages). One `apt-get update` per run, and only when something is installed.
apt_updated=""
apt_install() { # apt_install PACKAGE: Debian's package, with one `apt-get update` per run
  export DEBIAN_FRONTEND=noninteractive
  local log prefix="${APT_LOG_PREFIX:-[apt]}"
  log=$(mktemp)
  if [ -z "$apt_updated" ]; then
    apt-get update -qq >"$log" 2>&1 || { sed "s/^/$prefix   /" "$log" >&2; die "apt-get update failed (its messages are above)"; }
    apt_updated=1
  fi
  apt-get install -y -qq "$1" >"$log" 2>&1 || { sed "s/^/$prefix   /" "$log" >&2; die "apt-get install $1 failed (its messages are above)"; }
  rm -f "$log"
}
