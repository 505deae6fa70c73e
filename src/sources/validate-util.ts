/** Field errors in the API server's words (field.ErrorList), and small shape checks. */

/** One problem with one field: `spec.volumes[1].hostPath.path` and what is wrong. */
export interface FieldError {
  readonly field: string;
  readonly message: string;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A value shown in a message: quoted, control characters escaped, long ones cut. */
function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}…"` : text;
}

export function invalid(field: string, value: unknown, detail: string): FieldError {
  return { field, message: `Invalid value: ${shown(value)}: ${detail}` };
}

export function required(field: string, detail = ''): FieldError {
  return { field, message: `Required value${detail === '' ? '' : `: ${detail}`}` };
}

export function duplicate(field: string, value: unknown): FieldError {
  return { field, message: `Duplicate value: ${shown(value)}` };
}

export function notSupported(
  field: string,
  value: unknown,
  allowed: readonly string[],
): FieldError {
  const supported = allowed.map((a) => `"${a}"`).join(', ');
  return { field, message: `Unsupported value: ${shown(value)}: supported values: ${supported}` };
}

export function forbidden(field: string, detail: string): FieldError {
  return { field, message: `Forbidden: ${detail}` };
}

// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f]/;

export function hasControlCharacters(value: string): boolean {
  return controlCharacters.test(value);
}

/** A string field: present when `needed`, a string, without control characters. */
export function stringField(
  errors: FieldError[],
  field: string,
  value: unknown,
  needed: boolean,
): value is string {
  if (value === undefined || value === '') {
    if (needed) errors.push(required(field));
    return false;
  }
  if (typeof value !== 'string') {
    errors.push(invalid(field, value, 'must be a string'));
    return false;
  }
  if (hasControlCharacters(value)) {
    errors.push(invalid(field, value, 'must not contain control characters'));
    return false;
  }
  return true;
}

/** validatePathNoBacksteps: no `..` path segment. */
export function backstepProblem(path: string): string | undefined {
  return path.split('/').includes('..') ? "must not contain '..'" : undefined;
}

/** validateLocalDescendingPath: relative, without `..` segments (a file under a volume). */
export function localDescendingPathProblem(path: string): string | undefined {
  if (path.startsWith('/')) return 'must be a relative path';
  if (path.split('/').includes('..')) return "must not contain '..'";
  if (path.startsWith('..')) return "must not start with '..'";
  return undefined;
}

const quantityPattern =
  /^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$/;
const quantityFactors: Record<string, number> = {
  '': 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** resource.ParseQuantity's grammar: the value, or undefined when it does not parse. */
export function parseQuantity(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const match = quantityPattern.exec(value);
  if (match === null) return undefined;
  const suffix = match[3] ?? '';
  const factor = /^[eE]/.test(suffix) ? 10 ** Number(suffix.slice(1)) : quantityFactors[suffix];
  if (factor === undefined) return undefined;
  return (match[1] === '-' ? -1 : 1) * Number(match[2]) * factor;
}

const quantityMessage =
  "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/** A quantity that must parse and not be negative (sizeLimit, capacity, requests). */
export function quantityField(
  errors: FieldError[],
  field: string,
  value: unknown,
  needed: boolean,
): void {
  if (value === undefined) {
    if (needed) errors.push(required(field));
    return;
  }
  const parsed = parseQuantity(value);
  if (parsed === undefined) errors.push(invalid(field, value, quantityMessage));
  else if (parsed < 0) errors.push(invalid(field, value, 'must be greater than or equal to 0'));
}

/** A file mode (defaultMode, mode): 0 to 0777. */
export function modeField(errors: FieldError[], field: string, value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 0o777)
    errors.push(
      invalid(field, value, 'must be a number between 0 and 0777 (octal), both inclusive'),
    );
}
