#!/usr/bin/env bash
# Regenerates packages/rls/proto/envoy-rls-v3.binpb (Envoy's RLS v3 API as a
# FileDescriptorSet) from the Go module pinned in test/go-rls-client/go.mod.
# Run after changing that pin; packages/rls/test/descriptor.test.ts checks the two agree.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .bin/rls-descriptor ] || bash scripts/bootstrap.sh
.bin/rls-descriptor > packages/rls/proto/envoy-rls-v3.binpb
echo "wrote packages/rls/proto/envoy-rls-v3.binpb ($(wc -c < packages/rls/proto/envoy-rls-v3.binpb) bytes)"
# The RLQS API (issue 28) from the same module: rlqs.proto and its imports.
.bin/rls-descriptor envoy/service/rate_limit_quota/v3/rlqs.proto > packages/rls/proto/envoy-rlqs-v3.binpb
echo "wrote packages/rls/proto/envoy-rlqs-v3.binpb ($(wc -c < packages/rls/proto/envoy-rlqs-v3.binpb) bytes)"
