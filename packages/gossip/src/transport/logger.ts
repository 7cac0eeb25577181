/**
 * The logging surface the transport needs; a pino Logger satisfies it. The
 * default is silent: a library must not write to the console on its own.
 */
export interface TransportLogger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

const noop = (): void => {};

export const silentLogger: TransportLogger = { debug: noop, info: noop, warn: noop, error: noop };
