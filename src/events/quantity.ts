/**
 * Kubernetes quantities (apimachinery's resource.Quantity) as exact integers: `500m`, `2`,
 * `1.5`, `64Mi`, `1G`, `1e3`. Decimal arithmetic in BigInt, so `0.1` cpu is 100 millicores,
 * never 101 from a binary fraction; values round up, as Quantity.Value and MilliValue do.
 */

/** The multiplier of each suffix, as numerator / denominator. */
const suffixes: Record<string, readonly [bigint, bigint]> = {
  '': [1n, 1n],
  m: [1n, 1000n],
  k: [10n ** 3n, 1n],
  M: [10n ** 6n, 1n],
  G: [10n ** 9n, 1n],
  T: [10n ** 12n, 1n],
  P: [10n ** 15n, 1n],
  E: [10n ** 18n, 1n],
  Ki: [2n ** 10n, 1n],
  Mi: [2n ** 20n, 1n],
  Gi: [2n ** 30n, 1n],
  Ti: [2n ** 40n, 1n],
  Pi: [2n ** 50n, 1n],
  Ei: [2n ** 60n, 1n],
};

const form =
  /^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:([eE][+-]?[0-9]+)|(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei))?$/;

/** value × scale rounded up (away from zero for the non-negative quantities vole reads). */
function scaled(text: string, scale: bigint): bigint | undefined {
  const match = form.exec(text.trim());
  if (match === null) return undefined;
  const [whole = '', fraction = ''] = match[1]!.split('.');
  let num = BigInt(`${whole}${fraction}` || '0') * scale;
  let den = 10n ** BigInt(fraction.length);
  if (match[2] !== undefined) {
    const exponent = Number(match[2].slice(1));
    if (Math.abs(exponent) > 30) return undefined;
    if (exponent >= 0) num *= 10n ** BigInt(exponent);
    else den *= 10n ** BigInt(-exponent);
  } else {
    const [n, d] = suffixes[match[3] ?? '']!;
    num *= n;
    den *= d;
  }
  return (num + den - 1n) / den;
}

function toNumber(value: bigint | undefined): number | undefined {
  if (value === undefined || value > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  return Number(value);
}

/** Quantity.MilliValue: the quantity in thousandths, rounded up; undefined when malformed. */
export function quantityMillis(value: string | number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number' && !(Number.isFinite(value) && value >= 0)) return undefined;
  return toNumber(scaled(String(value), 1000n));
}

/** Quantity.Value: the quantity rounded up to a whole number; undefined when malformed. */
export function quantityValue(value: string | number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number' && !(Number.isFinite(value) && value >= 0)) return undefined;
  return toNumber(scaled(String(value), 1n));
}
