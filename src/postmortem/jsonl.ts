/** Export and import of a log as JSON Lines: one event per line, `{seq, tsMs, type, ...}`. */
import { type VoleEvent, parseEvent } from '../events/index.js';

export function* toJsonLines(events: Iterable<VoleEvent>): Generator<string> {
  for (const event of events) yield `${JSON.stringify(event)}\n`;
}

export class ImportError extends Error {
  override name = 'ImportError';
}

/** Parses JSON Lines; every event is validated and must follow the previous seq. */
export function* fromJsonLines(lines: Iterable<string>): Generator<VoleEvent> {
  let expected = 1;
  let lineNumber = 0;
  for (const line of lines) {
    lineNumber++;
    if (line.trim() === '') continue;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (error) {
      throw new ImportError(
        `line ${lineNumber}: not JSON (${(error as Error).message}); each line must be one event`,
      );
    }
    let event: VoleEvent;
    try {
      event = parseEvent(raw);
    } catch (error) {
      throw new ImportError(`line ${lineNumber}: ${(error as Error).message}`);
    }
    if (event.seq !== expected) {
      throw new ImportError(
        `line ${lineNumber}: seq ${event.seq} where ${expected} was expected; a log has no gaps`,
      );
    }
    expected++;
    yield event;
  }
}
