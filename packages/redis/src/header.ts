// Parses the contract block a lua/*.lua file opens with:
//   -- KEYS: 1 gq:inc, 2 gq:dirty, …   (then optionally "per item i … : P:b, P:c")
//   -- ARGV: 1 region, 2 algorithm, …
//   -- Returns: …
export interface ScriptHeader {
  readonly keys: string[];
  readonly argv: string[];
  readonly itemKeys: string[];
  readonly itemArgv: string[];
  readonly returns: string;
}

function section(lines: string[], tag: string, next: string): string {
  const start = lines.findIndex((l) => l.startsWith(`-- ${tag}:`));
  if (start < 0) return "";
  let end = lines.findIndex((l, i) => i > start && l.startsWith(`-- ${next}:`));
  if (end < 0) end = lines.length;
  return lines
    .slice(start, end)
    .map((l) => l.replace(/^--\s*/, ""))
    .join(" ")
    .slice(tag.length + 1);
}

function numbered(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|[\s,(])(\d+) ([A-Za-z][\w:|.]*)/g)) {
    const idx = Number(m[1]);
    if (idx === out.length + 1) out.push(m[2] as string);
  }
  return out;
}

function perItem(text: string): { fixed: string; items: string[] } {
  const at = text.indexOf("per item");
  if (at < 0) return { fixed: text, items: [] };
  const rest = text.slice(at);
  const colon = rest.indexOf(":");
  const names = rest
    .slice(colon + 1)
    .split(",")
    .map((s) => s.trim().split(/\s+/)[0] ?? "")
    .filter((s) => s.length > 0);
  return { fixed: text.slice(0, at), items: names };
}

export function parseHeader(source: string): ScriptHeader {
  const lines: string[] = [];
  for (const l of source.split("\n")) {
    if (!l.startsWith("--")) break;
    lines.push(l);
  }
  const k = perItem(section(lines, "KEYS", "ARGV"));
  const a = perItem(section(lines, "ARGV", "Returns"));
  return {
    keys: numbered(k.fixed),
    argv: numbered(a.fixed),
    itemKeys: k.items,
    itemArgv: a.items,
    returns: section(lines, "Returns", "\u0000").trim(),
  };
}
