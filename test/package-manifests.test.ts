// Every publishable package's manifest says the same about licence, source and
// Node as the repository does (issue 22 point 5): `license` is the one in
// LICENSE (pnpm pack puts the root LICENSE into each tarball that has none),
// `repository` is the root's with the package's directory, `engines` the root's.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";

const read = (p: string) => JSON.parse(readFileSync(join(repoRoot, p), "utf8"));

describe("package manifests", () => {
  it("license, repository and engines of every publishable package match LICENSE and the root manifest", () => {
    const root = read("package.json");
    const licence = readFileSync(join(repoRoot, "LICENSE"), "utf8");
    expect(licence.split("\n")[0]).toBe(`${root.license} License`);
    expect(root.repository?.url).toMatch(/^git\+https:\/\/github\.com\/[^/]+\/[^/]+\.git$/);
    const names = readdirSync(join(repoRoot, "packages"));
    expect(names.length).toBeGreaterThan(5);
    for (const name of names) {
      const m = read(`packages/${name}/package.json`);
      if (m.private === true) continue;
      expect(m.license, name).toBe(root.license);
      expect(m.repository, name).toEqual({ ...root.repository, directory: `packages/${name}` });
      expect(m.engines, name).toEqual(root.engines);
    }
  });
});
