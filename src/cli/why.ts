/** `vole why POD|VOLUME --db F [--at T]`: what each of the pod's volumes waits on, and why. */
import { describeEvent, why, whyText } from '../postmortem/index.js';
import { openReadonly } from '../postmortem/open.js';
import { rawWorldAt, resolveMoment, UsageError } from './postmortem.js';

export function whyCommand(
  db: string,
  subject: string,
  opts: { at?: string; json?: boolean },
): number {
  const store = openReadonly(db);
  try {
    const seq = resolveMoment(store, opts.at);
    const answer = why(rawWorldAt(store, seq), subject);
    if (answer === undefined)
      throw new UsageError(
        `no pod or volume "${subject}" at seq ${seq}: give a pod UID, namespace/name or name, ` +
          `or a UniqueVolumeName (vole status --db ${db} lists them)`,
      );
    if (opts.json === true) {
      process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
      return 0;
    }
    const text = whyText(answer, {
      originMs: store.bounds().firstTsMs,
      tsOf: (s) => store.get(s)?.tsMs,
      describe: (s) => {
        const event = store.get(s);
        return event === undefined ? undefined : describeEvent(event);
      },
    });
    process.stdout.write(`${text}\n`);
    return 0;
  } finally {
    store.close();
  }
}
