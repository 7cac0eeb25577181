// Shared shapes of the demo: what traffic targets, what a scenario asks for,
// what the pollers sample. Pure data; every module of the demo speaks these.

export type ScenarioName = "steady" | "shift" | "partition" | "state-loss" | "stream";

/** The scenarios `--scenario all` walks, in order. */
export const SCENARIOS: readonly ScenarioName[] = ["steady", "shift", "partition", "state-loss", "stream"];

/** A (tenant, resource) key the demo sends traffic for. */
export interface DemoKey {
  readonly tenant: string;
  readonly resource: string;
  /** Global limit of the key (from the policies file), for the oracle and the bound line. */
  readonly capacity: number;
  readonly refillPerSecond: number;
}

/** Requests per second per region, for each key index. */
export type Demand = ReadonlyArray<Readonly<Record<string, number>>>;

export type FaultKind = "partition" | "state-loss";

/** A fault as shown in the report: a shaded window on every time chart. */
export interface FaultWindow {
  readonly kind: FaultKind;
  readonly label: string;
  /** Client clock, ms since the demo's time origin. */
  readonly startMs: number;
  endMs: number;
}

export interface ScenarioWindow {
  readonly name: ScenarioName;
  readonly startMs: number;
  readonly endMs: number;
}

/** One poll of every region's view of the main key and every daemon's links. */
export interface ClusterSample {
  readonly tMs: number;
  readonly regions: Readonly<
    Record<
      string,
      { readonly sharePpm: number; readonly recovering: boolean; readonly tokens: number } | null
    >
  >;
  /** `a>b`: how far behind a's view of b is, as a's daemon reports it; null when unknown. */
  readonly links: Readonly<Record<string, { readonly up: boolean; readonly lagMs: number | null }>>;
}

export type Writer = (text: string) => void;
