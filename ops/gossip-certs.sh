#!/usr/bin/env bash
# Makes the certificates for mutual TLS between gossip daemons: one CA and,
# per region, a key and a certificate usable as server and client.
#
#   ops/gossip-certs.sh OUT_DIR REGION... [-- EXTRA_SAN...]
#   e.g. ops/gossip-certs.sh certs/gossip us-east eu-west ap-south
#
# Writes OUT_DIR/ca.crt, OUT_DIR/ca.key and OUT_DIR/<region>.{crt,key}. Each
# region certificate names DNS:gossip-<region> (the compose service),
# DNS:toxiproxy (compose dials peers through Toxiproxy, and the dialer checks
# the name it dialed), DNS:localhost and IP:127.0.0.1, plus any EXTRA_SAN
# (`DNS:gossip.eu.example.com`, `IP:10.0.0.7`). A dialer verifies the host
# name of the peer URL (`regions[].gossip`) against these names, and both
# sides require a certificate signed by ca.crt.
#
# An existing ca.key is reused, so regions can be added later. Keep ca.key
# off the servers: daemons need only ca.crt and their own pair. Keys are
# written 0600; the container user must be able to read them (chown them to
# that user, or make them readable by its group).
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 OUT_DIR REGION... [-- EXTRA_SAN...]" >&2
  exit 2
fi
out=$1
shift
regions=()
extra=()
while [[ $# -gt 0 ]]; do
  if [[ $1 == "--" ]]; then
    shift
    extra=("$@")
    break
  fi
  if [[ ! $1 =~ ^[A-Za-z0-9_.-]{1,128}$ ]]; then
    echo "$0: region id '$1' must match ^[A-Za-z0-9_.-]{1,128}\$" >&2
    exit 2
  fi
  regions+=("$1")
  shift
done
command -v openssl >/dev/null || {
  echo "$0: openssl not found" >&2
  exit 1
}
mkdir -p "$out"
days=${GOSSIP_CERT_DAYS:-365}
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
umask 077
if [[ ! -f $out/ca.key ]]; then
  openssl req -x509 "${ec[@]}" -keyout "$out/ca.key" -out "$out/ca.crt" -days "$days" \
    -subj "/CN=geoquota gossip CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi
for r in "${regions[@]}"; do
  san="DNS:gossip-$r,DNS:toxiproxy,DNS:localhost,IP:127.0.0.1"
  for e in "${extra[@]}"; do san="$san,$e"; done
  openssl req "${ec[@]}" -keyout "$out/$r.key" -out "$out/$r.csr" -subj "/CN=$r" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\n' "$san" >"$out/$r.ext"
  openssl x509 -req -in "$out/$r.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
    -out "$out/$r.crt" -days "$days" -extfile "$out/$r.ext" 2>/dev/null
  rm -f "$out/$r.csr" "$out/$r.ext"
done
chmod 644 "$out/ca.crt"
for r in "${regions[@]}"; do chmod 644 "$out/$r.crt"; done
echo "$0: wrote $out/ca.crt and ${#regions[@]} region certificate(s)"
