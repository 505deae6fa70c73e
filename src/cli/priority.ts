/**
 * `--event-loop-nice` of `vole run` and `vole controller`: the event loop thread's
 * priority (src/host/event-loop-priority.ts), set before the engine starts.
 */
import { InvalidArgumentError, Option } from 'commander';
import type { Logger } from 'pino';
import {
  defaultEventLoopNice,
  eventLoopNiceDefault,
  parseNice,
  setEventLoopNice,
} from '../host/event-loop-priority.js';

export interface EventLoopNiceOptions {
  readonly eventLoopNice?: number;
}

export function eventLoopNiceOption(): Option {
  return new Option(
    '--event-loop-nice <n>',
    'the Linux nice value of the event loop thread alone, where the log is committed ' +
      `(default ${eventLoopNiceDefault} as root, else unchanged; V8's background threads keep ` +
      "the process's)",
  ).argParser((text) => {
    try {
      return parseNice(text);
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message);
    }
  });
}

/** Sets the asked (or default) nice value and says what came of it. */
export function applyEventLoopNice(opts: EventLoopNiceOptions, logger: Logger): void {
  const nice = opts.eventLoopNice ?? defaultEventLoopNice();
  if (nice === undefined) return;
  const outcome = setEventLoopNice(nice);
  if (outcome.refused === undefined) logger.debug({ nice: outcome.nice }, 'event loop priority');
  else
    logger.warn(
      { asked: nice, nice: outcome.nice },
      `event loop priority left as it is: ${outcome.refused}`,
    );
}
