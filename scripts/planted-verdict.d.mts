// Types of scripts/planted-verdict.mjs, for test/planted.test.ts.
export interface Failure {
  test: string;
  crash: string | undefined;
}
export interface VitestReport {
  testResults: {
    name?: string;
    status: string;
    message?: string;
    assertionResults: { status: string; fullName: string; failureMessages?: string[] }[];
  }[];
}
export function crashOf(message: string): string | undefined;
export function failuresOf(report: VitestReport, file: string): Failure[];
export function verdictOf(failures: Failure[]): { verdict: "caught" | "invalid"; detail: string };
export function typeErrorsOf(output: string): string[];
export function newTypeErrors(before: string[], after: string[]): string[];
