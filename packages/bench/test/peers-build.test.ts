// The peers' build step: a peer that is present is used as is, and one that
// cannot be built comes back as an error naming the module, the version and
// what went wrong (the section turns it into a "not run" row), never a throw.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ensurePeer, PEER_MODULES } from "../src/peers-build.js";

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "geoquota-peers-build-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  delete process.env.GQ_GUBERNATOR;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function script(dir: string, name: string, body: string): string {
  const p = join(dir, name);
  writeFileSync(p, `#!/bin/sh\n${body}\n`);
  chmodSync(p, 0o755);
  return p;
}

it("uses .bin/<name> when it is there, without building", async () => {
  const bin = tempDir();
  script(bin, "gubernator", "exit 0");
  const go = script(tempDir(), "go", "echo should-not-run >&2; exit 1");
  expect(await ensurePeer("gubernator", { binDir: bin, go })).toEqual({
    ok: true,
    path: join(bin, "gubernator"),
    built: false,
  });
});

it("reports a failed go install with the module, the version and Go's last words", async () => {
  const go = script(tempDir(), "go", 'echo "go: module lookup disabled by GOPROXY=off" >&2; exit 1');
  const r = await ensurePeer("envoy-ratelimit", { binDir: tempDir(), go });
  expect(r.ok).toBe(false);
  const m = PEER_MODULES["envoy-ratelimit"];
  expect(!r.ok && r.error).toBe(
    `go install ${m.pkg}@${m.version} failed: go: module lookup disabled by GOPROXY=off`,
  );
});

it("installs what go install wrote into GOBIN under the peer's name", async () => {
  const bin = tempDir();
  // A stand-in for `go install`: writes the binary Go would, where GOBIN says.
  const go = script(
    tempDir(),
    "go",
    'printf "#!/bin/sh\\necho built\\n" > "$GOBIN/gubernator" && chmod +x "$GOBIN/gubernator"',
  );
  expect(await ensurePeer("gubernator", { binDir: bin, go })).toEqual({
    ok: true,
    path: join(bin, "gubernator"),
    built: true,
  });
});

it("names a missing Go toolchain and a wrong override", async () => {
  const r = await ensurePeer("gubernator", { binDir: tempDir(), go: join(tempDir(), "no-go-here") });
  expect(!r.ok && r.error).toMatch(/the Go toolchain \(go\) is not on PATH/);
  process.env.GQ_GUBERNATOR = "/nonexistent/gubernator";
  expect(await ensurePeer("gubernator")).toEqual({
    ok: false,
    error: "GQ_GUBERNATOR=/nonexistent/gubernator is not an executable file",
  });
});
