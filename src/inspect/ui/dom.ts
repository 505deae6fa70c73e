/// <reference lib="dom" />
/** Tiny DOM helpers: elements from a tag, attributes and children; fetch of the JSON API. */

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

function apply(el: Element, attrs: Attrs, children: Child[]): void {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.replace(/^on/, ''), value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === 'object' ? child : String(child));
  }
}

/** An HTML element: h('div', {class: 'x', onclick: f}, 'text', child). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  apply(el, attrs, children);
  return el;
}

const svgNs = 'http://www.w3.org/2000/svg';

/** An SVG element. */
export function s<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(svgNs, tag);
  apply(el, attrs, children);
  return el;
}

export function clear(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  apply(el, {}, children);
}

class ApiError extends Error {}

export async function getJson<T>(path: string): Promise<T> {
  const res = await fetch(path, { headers: { accept: 'application/json' } });
  const body = (await res.json()) as T | { error: string };
  if (!res.ok)
    throw new ApiError((body as { error: string }).error ?? `${res.status} ${res.statusText}`);
  return body as T;
}

/** `+2.5s` from the log's first event; with an ISO time too when the log keeps wall-clock times. */
export function formatTime(tsMs: number, originMs: number, withClock = false): string {
  const offset = `+${((tsMs - originMs) / 1000).toFixed(3)}s`;
  return withClock && tsMs > 1e12 ? `${offset}  ${new Date(tsMs).toISOString()}` : offset;
}

/** The CSS class of a state: initial, transitional, settled, uncertain. */
export function stateTone(state: string): string {
  if (state.includes('Uncertain')) return 'uncertain';
  const leaf = state.split('.').pop() ?? state;
  if (leaf === 'detached' || leaf === 'unmounted') return 'idle';
  if (leaf.endsWith('ing')) return 'busy';
  return 'settled';
}
