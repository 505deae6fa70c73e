/** Durations of the scenario format: `500ms`, `10s`, `2m`, `1h`, `1m30s`. */
const unitMs: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseDurationMs(text: string): number | undefined {
  const trimmed = text.trim();
  if (!/^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$/.test(trimmed)) return undefined;
  let total = 0;
  for (const match of trimmed.matchAll(/([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)/g)) {
    total += Number(match[1]) * unitMs[match[2]!]!;
  }
  return Math.round(total);
}
