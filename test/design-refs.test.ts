// Every section or trap reference in the repository resolves in docs/design.md:
// `§N`, `§N.M`, `DESIGN §N`, `DESIGN GN`, `trap N`, `traps N/M`, `traps N, M and K`
// in every source, test, Lua, script, model, JSON and Markdown file
// (node_modules, dist, .tmp and hidden directories excluded). References to
// other documents are qualified and skipped: "seed §N", "the seed's §N",
// "RFC NNNN §N". Also: docs/design.md keeps the shared design's eleven section
// headings, and its §10 names real tests and real rows of the planted table.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const design = readFileSync(join(ROOT, "docs/design.md"), "utf8");

const SKIPPED_DIRS = new Set(["node_modules", "dist", ".tmp"]);
const SCANNED = /\.(ts|mts|cts|js|mjs|cjs|lua|sh|pml|md|json|ya?ml)$/;
const SECTION = "\u00a7"; // the section sign, spelled out so this file cites nothing

/** Files to scan, relative to the repository root. */
function scannedFiles(dir = ROOT): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (!SKIPPED_DIRS.has(name) && !name.startsWith(".")) out.push(...scannedFiles(path));
    } else if (SCANNED.test(name) || name === ".dependency-cruiser.cjs") {
      out.push(relative(ROOT, path));
    }
  }
  return out.sort();
}

type Ref = { readonly kind: "section" | "trap" | "guarantee"; readonly id: string; readonly text: string };

const sectionRef = new RegExp(`${SECTION}\\s?(\\d+(?:\\.\\d+)*)`, "g");
/** A reference into another document: the seed write-up or an RFC. */
const foreignQualifier = /(\bseed(?:'s)?|\bRFC\s*\d+)\s*$/i;
const trapRef = /\b[Tt]raps?\s+(\d+(?:\s*(?:\/|,|&|\band\b)\s*\d+)*)/g;
const guaranteeRef = /\bDESIGN\s+G(\d+)\b/g;

/** The references one line makes. */
function referencesIn(line: string): Ref[] {
  const refs: Ref[] = [];
  for (const m of line.matchAll(sectionRef)) {
    if (foreignQualifier.test(line.slice(0, m.index))) continue;
    refs.push({ kind: "section", id: m[1]!, text: m[0] });
  }
  for (const m of line.matchAll(trapRef)) {
    for (const n of m[1]!.match(/\d+/g) ?? []) refs.push({ kind: "trap", id: n, text: m[0] });
  }
  for (const m of line.matchAll(guaranteeRef)) refs.push({ kind: "guarantee", id: m[1]!, text: m[0] });
  return refs;
}

/** What docs/design.md defines: numbered headings, `### Trap N` headings, **GN** guarantees. */
function targets(): Record<Ref["kind"], Set<string>> {
  const section = new Set<string>();
  const trap = new Set<string>();
  const guarantee = new Set<string>();
  for (const line of design.split("\n")) {
    const h = /^#{2,4}\s+(\d+(?:\.\d+)*)\.?\s/.exec(line);
    if (h) section.add(h[1]!);
    const t = /^###\s+Trap\s+(\d+)\b/.exec(line);
    if (t) trap.add(t[1]!);
    for (const g of line.matchAll(/\*\*G(\d+)\s/g)) guarantee.add(g[1]!);
  }
  return { section, trap, guarantee };
}

/** `file:line: text` for every reference that does not resolve. */
function unresolved(files: readonly string[], read: (file: string) => string): string[] {
  const defined = targets();
  const bad: string[] = [];
  for (const file of files) {
    read(file)
      .split("\n")
      .forEach((line, i) => {
        for (const ref of referencesIn(line)) {
          if (!defined[ref.kind].has(ref.id))
            bad.push(`${file}:${i + 1}: "${ref.text}" (${ref.kind} ${ref.id})`);
        }
      });
  }
  return bad;
}

const readRepoFile = (file: string) => readFileSync(join(ROOT, file), "utf8");

/** The text of `### Trap N` up to the next heading. */
function trapSection(n: string): string {
  const start = design.search(new RegExp(`^### Trap ${n}\\b`, "m"));
  if (start < 0) return "";
  const rest = design.slice(design.indexOf("\n", start) + 1);
  const end = rest.search(/^#{2,3} /m);
  return end < 0 ? rest : rest.slice(0, end);
}

describe("section and trap references (docs/design.md)", () => {
  const files = scannedFiles();

  it("scans the repository's sources, tests, Lua, scripts and docs", () => {
    for (const f of [
      "lua/lib/core.lua",
      "packages/limiter/src/leased-client.ts",
      "scripts/test.sh",
      "docs/internals.md",
    ]) {
      expect(files).toContain(f);
    }
    expect(files.some((f) => f.includes("node_modules") || f.split("/").includes("dist"))).toBe(false);
    // It finds the references the code makes (about 360 when this test was written).
    const found = files.flatMap((f) => readRepoFile(f).split("\n").flatMap(referencesIn));
    expect(found.filter((r) => r.kind === "section").length).toBeGreaterThan(150);
    expect(found.filter((r) => r.kind === "trap").length).toBeGreaterThan(60);
  });

  it("every reference resolves to a heading or trap of docs/design.md", () => {
    expect(unresolved(files, readRepoFile)).toEqual([]);
  });

  it("reads the forms the code uses, and skips references into other documents", () => {
    const ids = (line: string) => referencesIn(line).map((r) => `${r.kind} ${r.id}`);
    expect(ids(`Defaults follow DESIGN ${SECTION}3/${SECTION}6/${SECTION}7.`)).toEqual([
      "section 3",
      "section 6",
      "section 7",
    ]);
    expect(ids(`(traps 1/10/11) and (traps 1, 10, 11) and (traps 1 and 10)`)).toEqual(
      ["1", "10", "11", "1", "10", "11", "1", "10"].map((n) => `trap ${n}`),
    );
    expect(ids(`(DESIGN Trap 10; ${SECTION}4.2; utilization (DESIGN G2)`)).toEqual([
      "section 4.2",
      "trap 10",
      "guarantee 2",
    ]);
    expect(ids(`seed ${SECTION}5.2, the seed's ${SECTION}2.2.2, RFC 6455 ${SECTION}7.4.1`)).toEqual([]);
    expect(ids(`(seed ${SECTION}5.2, DESIGN ${SECTION}7)`)).toEqual(["section 7"]);
    expect(ids("bootstrap 2 is not a trap")).toEqual([]);
  });

  it("a reference to a missing section or trap is reported with its file and line", () => {
    const trap = "trap"; // spelled apart so this file's own scan does not see the planted reference
    const planted = `// see DESIGN ${SECTION}12 and ${SECTION}3.9, ${trap} 13\nok: ${SECTION}3.3, trap 12\n`;
    expect(unresolved(["planted.ts"], () => planted)).toEqual([
      `planted.ts:1: "${SECTION}12" (section 12)`,
      `planted.ts:1: "${SECTION}3.9" (section 3.9)`,
      `planted.ts:1: "${trap} 13" (${trap} 13)`,
    ]);
  });
});

describe("docs/design.md", () => {
  it("keeps the shared design's section numbers and headings (§1 … §11)", () => {
    const headings = design.split("\n").filter((l) => /^## \d+\. /.test(l));
    expect(headings).toEqual([
      "## 1. Guarantees",
      "## 2. Model",
      "## 3. Leases (re-weighting without breaking the invariant)",
      "## 4. State loss and expiry (G5)",
      "## 5. CRDT library (`packages/crdt`)",
      "## 6. Gossip daemon (`packages/gossip`)",
      "## 7. Regional limiter (`packages/limiter`, `lua/`)",
      "## 8. Contract (black-box; tests and users rely on it)",
      "## 9. Known flaws of the seed's sample code (do better)",
      "## 10. Traps (each deserves a test that fails if it comes back)",
      "## 11. Gateways (Envoy RLS, RLQS, nginx)",
    ]);
    expect([...targets().trap].map(Number).sort((a, b) => a - b)).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
    ]);
    expect([...targets().guarantee].sort()).toEqual(["1", "2", "3", "4", "5"]);
  });

  it("every file and page it (and architecture.md) cites exists", () => {
    const missing: string[] = [];
    for (const doc of ["docs/design.md", "docs/architecture.md"]) {
      const text = readRepoFile(doc);
      for (const m of text.matchAll(
        /`((?:packages|lua|test|scripts|model|regions|docs)\/[^`\s]*[^`\s/])`/g,
      )) {
        if (!m[1]!.includes("*") && !existsSync(join(ROOT, m[1]!))) missing.push(`${doc}: ${m[1]}`);
      }
      for (const m of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (!/^[a-z]+:/.test(m[1]!) && !existsSync(resolve(ROOT, dirname(doc), m[1]!))) {
          missing.push(`${doc}: ${m[1]}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it("§10 names each trap's planted rows, and only rows of the planted table", () => {
    const table = JSON.parse(readRepoFile("test/planted/planted.json")) as {
      rows: { id: string; rule: string }[];
    };
    const ids = new Set(table.rows.map((r) => r.id));
    const traps = design.slice(design.indexOf("## 10. "));
    const problems: string[] = [];
    // Every backticked kebab-case id in §10 (row ids; paths and script names have no hyphen-only form) is a row.
    for (const m of traps.matchAll(/`([a-z0-9]+(?:-[a-z0-9]+)+)`/g)) {
      if (!ids.has(m[1]!)) problems.push(`§10 names "${m[1]}", not a row of test/planted/planted.json`);
    }
    // Every row whose rule cites a trap is listed under that trap.
    for (const row of table.rows) {
      for (const m of row.rule.matchAll(/\btrap (\d+)\b/g)) {
        if (!trapSection(m[1]!).includes(`\`${row.id}\``))
          problems.push(`row ${row.id} is not listed under Trap ${m[1]}`);
      }
    }
    // Every row is accounted for somewhere in §10.
    for (const id of ids) if (!traps.includes(`\`${id}\``)) problems.push(`row ${id} is not named in §10`);
    expect(problems).toEqual([]);
  });
});
