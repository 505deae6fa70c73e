/**
 * A progress bar on stderr for long reads of a log, only in a terminal and only for reads
 * long enough to need one; plain output when piped stays clean.
 */
const progressEventsMin = 100_000;

export function* withProgress<T extends { seq: number }>(
  events: Iterable<T>,
  opts: { label: string; fromSeq: number; toSeq: number },
): Generator<T> {
  const total = opts.toSeq - opts.fromSeq + 1;
  const show = process.stderr.isTTY === true && total >= progressEventsMin;
  let next = opts.fromSeq;
  for (const event of events) {
    if (show && event.seq >= next) {
      const percent = Math.floor(((event.seq - opts.fromSeq) / total) * 100);
      const bar = '█'.repeat(Math.floor(percent / 4)).padEnd(25, '·');
      process.stderr.write(`\r${opts.label} ${bar} ${percent}% (seq ${event.seq})`);
      next = event.seq + Math.max(1, Math.floor(total / 200));
    }
    yield event;
  }
  if (show) process.stderr.write('\r\x1b[K');
}
