import { describe, expect, it } from "vitest";
import {
  bar,
  fmtBytes,
  type LiveState,
  type LiveStream,
  renderFrame,
  renderLine,
  ttyFrame,
} from "../src/demo/live-view.js";

const state: LiveState = {
  elapsedMs: 31_500,
  durationMs: 90_000,
  scenario: "partition",
  scenarioDescription: "us-east is cut off from gossip, then healed",
  fault: "us-east partitioned",
  key: "cust_ent_9942/payments_checkout",
  refillPerSecond: 1000 / 60,
  regions: [
    {
      id: "us-east",
      sharePpm: 960_000,
      recovering: false,
      admittedPerSec: 16,
      deniedPerSec: 134,
      errorsPerSec: 0,
    },
    {
      id: "eu-west",
      sharePpm: 20_000,
      recovering: true,
      admittedPerSec: 0,
      deniedPerSec: 0,
      errorsPerSec: 0,
    },
    {
      id: "ap-south",
      sharePpm: null,
      recovering: false,
      admittedPerSec: 0,
      deniedPerSec: 0,
      errorsPerSec: 0,
    },
  ],
  admitted: 1520,
  bound: 1525.5,
  links: [
    { from: "us-east", to: "eu-west", up: false, lagMs: null },
    { from: "eu-west", to: "us-east", up: true, lagMs: 412 },
  ],
  sent: 4000,
  shed: 0,
};

const hasAnsi = (s: string) => s.includes("\x1b[");

describe("live view", () => {
  it("renders shares, rates, the bound, lags, scenario and fault", () => {
    const f = renderFrame(state, false);
    expect(hasAnsi(f)).toBe(false);
    expect(f).toContain("scenario: partition");
    expect(f).toContain("fault: us-east partitioned");
    expect(f).toMatch(/us-east\s+█{30}▊· +960000 +16\.0 +134\.0/);
    expect(f).toMatch(/eu-west .* 20000 .* recovering/);
    expect(f).toMatch(/ap-south\s+\?{32}\s+\?/);
    expect(f).toContain("global admitted 1520 ≤ bound C + r·T = 1525.5");
    expect(f).toMatch(/us-east→eu-west\s+down/);
    expect(f).toMatch(/eu-west→us-east\s+412ms/);
    for (const line of f.split("\n")) expect([...line].length).toBeLessThanOrEqual(80);
  });

  it("flags a bound overshoot in the live line", () => {
    expect(renderFrame({ ...state, admitted: 1600 }, false)).toContain("global admitted 1600 > bound");
  });

  it("redraws in place on a TTY", () => {
    const f = ttyFrame(state);
    expect(f.startsWith("\x1b[H\x1b[2J")).toBe(true);
    expect(f).toContain("\x1b[1m");
  });

  it("prints one plain line per tick without a TTY", () => {
    const l = renderLine(state);
    expect(hasAnsi(l)).toBe(false);
    expect(l.endsWith("\n")).toBe(true);
    expect(l.split("\n")).toHaveLength(2);
    expect(l).toContain("[ 32s] partition (us-east partitioned)");
    expect(l).toContain("us-east share=96.0% adm=16/s den=134/s");
    expect(l).toContain("eu-west share=2.0%(rec)");
    expect(l).toContain("admitted 1520 of bound 1525.5");
    expect(l).toContain("us-east>eu-west=down eu-west>us-east=412ms");
  });

  const stream: LiveStream = {
    key: "cust_ent_9942/stream_bytes",
    refillPerSecond: 262_144,
    multiple: 10,
    active: true,
    regions: [
      {
        id: "us-east",
        bytesPerSec: 90_112,
        paused: 1,
        connections: 1,
        clientBufferedBytes: 4 * 1024 * 1024,
        sharePpm: 340_000,
      },
      {
        id: "eu-west",
        bytesPerSec: 86_016,
        paused: 0,
        connections: 1,
        clientBufferedBytes: 1536,
        sharePpm: 330_000,
      },
      {
        id: "ap-south",
        bytesPerSec: 86_016,
        paused: 1,
        connections: 1,
        clientBufferedBytes: 0,
        sharePpm: null,
      },
    ],
  };

  it("shows the stream tenant: bytes/s per region against r, paused connections, held-back bytes", () => {
    const f = renderFrame({ ...state, scenario: "stream", stream }, false);
    expect(f).toContain("stream cust_ent_9942/stream_bytes  (r = 256.0 KiB/s, clients offer 10× r)");
    expect(f).toMatch(/us-east\s+█{8}\S*·+\s+88\.0\s+34\.0%\s+1\/1\s+4\.0 MiB/);
    expect(f).toMatch(/eu-west\s+\S+\s+84\.0\s+33\.0%\s+0\/1\s+1\.5 KiB/);
    expect(f).toMatch(/ap-south\s+\S+\s+84\.0\s+\?\s+1\/1\s+0 B/);
    expect(f).toMatch(/^all\s+█{24}\s+256\.0 {2}= 100% of r$/m);
    for (const line of f.split("\n")) expect([...line].length).toBeLessThanOrEqual(80);
    expect(renderFrame({ ...state, stream: { ...stream, active: false } }, false)).toMatch(/10× r\) idle/);
    expect(renderFrame(state, false)).not.toContain("stream");
    const l = renderLine({ ...state, stream });
    expect(l).toContain(
      "| stream us-east=88KiB/s share=34.0% paused=1/1 eu-west=84KiB/s share=33.0% paused=0/1 ap-south=84KiB/s share=? paused=1/1 all=256KiB/s of r=256KiB/s",
    );
    expect(l.split("\n")).toHaveLength(2);
    expect(renderLine({ ...state, stream: { ...stream, active: false } })).not.toContain("stream");
    expect([fmtBytes(512), fmtBytes(2048), fmtBytes(3 * 1024 * 1024)]).toEqual([
      "512 B",
      "2.0 KiB",
      "3.0 MiB",
    ]);
  });

  it("draws bars with eighth-block resolution and clamps", () => {
    expect(bar(0, 4)).toBe("····");
    expect(bar(1, 4)).toBe("████");
    expect(bar(2, 4)).toBe("████");
    expect(bar(0.5, 4)).toBe("██··");
    expect(bar(1 / 16, 4)).toBe("▎···"); // a quarter cell
    expect(bar(Number.NaN, 2)).toBe("··");
  });
});
