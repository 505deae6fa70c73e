/** The CLI's root logger: quiet by default, to stderr, raised with --log-level. */
import pino, { type Logger } from 'pino';

export const logLevels = ['silent', 'fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;

export function cliLogger(level: string): Logger {
  return pino(
    { level, base: undefined, redact: ['*.secret', '*.token', 'pod.spec.volumes[*].secret'] },
    pino.destination({ dest: 2, sync: true }),
  );
}
