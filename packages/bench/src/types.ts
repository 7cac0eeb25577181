// Shapes shared by the bench sections. Every section returns plain numbers
// (JSON-ready); the runner renders the table and writes the file.

/** Where the bench writes its human output (stdout in the CLI, a buffer in tests). */
export type Write = (text: string) => void;

/** Per-section time budget: smoke keeps the whole run near a minute. */
export interface Budget {
  readonly smoke: boolean;
  /** Length of one measured run, ms. */
  readonly runMs: number;
  /** Alternating rounds (A B C A B C …). */
  readonly rounds: number;
}

export interface LatencySummary {
  readonly p50Us: number;
  readonly p99Us: number;
  readonly p999Us: number;
}

/** One row of the printed table. */
export interface Row {
  readonly section: string;
  readonly metric: string;
  readonly value: string;
  readonly target: string;
  /** undefined when the row has no target. */
  readonly met?: boolean;
}
