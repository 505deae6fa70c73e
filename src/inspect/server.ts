/**
 * `vole inspect`: a read-only web page over one log. The server opens the database
 * read-only (or follows the controller log in etcd, src/cluster/log-mirror.ts, writing
 * nothing there), serves the page's assets from memory, answers GET/HEAD only (405 for any
 * other method), reads no file but the database, and binds 127.0.0.1 unless told otherwise.
 *
 * It polls the log's head (the file is in WAL mode, so a reader sees an agent's commits;
 * the etcd mirror's head moves with its watch) and pushes what is new to every open page
 * with Server-Sent Events.
 *
 *   GET /                    the page (/app.js, /app.css, /favicon.svg)
 *   GET /api/meta            file name, head, bounds, node, timeline marks
 *   GET /api/world?at=SEQ    the world and the pair list at SEQ (default: the head)
 *   GET /api/events?from=A&to=B   event summaries (at most 500)
 *   GET /api/event?seq=N     one event's payload
 *   GET /api/explain?seq=N   its chain of causes
 *   GET /api/history?pair=ID one pair's transitions
 *   GET /api/chart?machine=attachment|mount   the statechart, from the machine definition
 *   GET /api/verdict         the judge's verdict on a cluster's log: violations, waits
 *   GET /api/stream          Server-Sent Events: `head` whenever the log grows
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { basename } from 'node:path';
import type { AddressInfo } from 'node:net';
import { LogReadError } from '../log/errors.js';
import { openReadonly } from '../postmortem/open.js';
import { type Store, Tracker } from './api.js';
import { type Assets, faviconSvg, indexHtml, loadAssets } from './assets.js';
import { charts } from './chart.js';

/** A log the inspector reads that is not a SQLite file (the controller log in etcd). */
export interface InspectedSource {
  readonly store: Store;
  /** What the page calls it. */
  readonly name: string;
  close(): void | Promise<void>;
}

export interface InspectorOptions {
  /** A SQLite log file, opened read-only; or `source`. */
  readonly db?: string;
  readonly source?: InspectedSource;
  /** 0 (default) picks a free port. */
  readonly port?: number;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** How often the head is polled (default 200 ms). */
  readonly pollMs?: number;
  /** Problems worth telling the operator (a failed poll); default: stderr. */
  readonly warn?: (message: string) => void;
}

export interface InspectorServer {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly assetsSource: string;
  close(): Promise<void>;
}

const inspectorPollMsDefault = 200;
/** A comment line on idle event streams, so proxies and browsers keep them open. */
const keepAliveMs = 15_000;

const securityHeaders = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
};

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

const loopbackNames = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

function isLoopback(host: string): boolean {
  return loopbackNames.has(host) || host.startsWith('127.');
}

/** Refuses anything that could name a file: `..`, encoded dots or slashes, backslashes, NUL. */
function checkPath(rawUrl: string): void {
  const path = rawUrl.split('?')[0] ?? '';
  if (!path.startsWith('/') || /\.\.|%2e|%2f|%5c|\\|%00|\0/i.test(path)) {
    throw new HttpError(400, 'path refused: the inspector serves fixed routes only');
  }
}

function seqParam(params: URLSearchParams, name: string, fallback?: number): number {
  const text = params.get(name);
  if (text === null || text === '') {
    if (fallback !== undefined) return fallback;
    throw new HttpError(400, `${name}: give a seq (a number)`);
  }
  if (!/^[0-9]{1,15}$/.test(text))
    throw new HttpError(400, `${name}=${text}: give a seq (a number)`);
  return Number(text);
}

type Route = (params: URLSearchParams, req: IncomingMessage, res: ServerResponse) => void;

function send(
  res: ServerResponse,
  req: IncomingMessage,
  status: number,
  type: string,
  body: string | Buffer,
  extra: Record<string, string> = {},
): void {
  const data = typeof body === 'string' ? Buffer.from(body) : body;
  res.writeHead(status, {
    ...securityHeaders,
    'content-type': type,
    'content-length': String(data.length),
    ...extra,
  });
  res.end(req.method === 'HEAD' ? undefined : data);
}

function json(res: ServerResponse, req: IncomingMessage, value: unknown): void {
  send(res, req, 200, 'application/json; charset=utf-8', JSON.stringify(value), {
    'cache-control': 'no-store',
  });
}

/** The page and its assets, from memory. */
function pageRoutes(assets: Assets): Record<string, Route> {
  const page: Route = (_p, req, res) =>
    send(res, req, 200, 'text/html; charset=utf-8', indexHtml, { 'cache-control': 'no-cache' });
  return {
    '/': page,
    '/index.html': page,
    '/app.js': (_p, req, res) =>
      send(res, req, 200, 'text/javascript; charset=utf-8', assets.js, {
        'cache-control': 'no-cache',
      }),
    '/app.css': (_p, req, res) =>
      send(res, req, 200, 'text/css; charset=utf-8', assets.css, { 'cache-control': 'no-cache' }),
    '/favicon.svg': (_p, req, res) =>
      send(res, req, 200, 'image/svg+xml', faviconSvg, { 'cache-control': 'max-age=86400' }),
  };
}

/** The JSON behind the page. */
function apiRoutes(tracker: Tracker, name: string): Record<string, Route> {
  const found = <T>(value: T | undefined): T => {
    if (value === undefined) throw new HttpError(404, 'no event with that seq in this log');
    return value;
  };
  return {
    '/api/meta': (_p, req, res) => json(res, req, tracker.meta(name)),
    '/api/world': (p, req, res) => json(res, req, tracker.worldAt(seqParam(p, 'at', tracker.head))),
    '/api/events': (p, req, res) => {
      const to = seqParam(p, 'to', tracker.head);
      json(res, req, tracker.events(seqParam(p, 'from', Math.max(1, to - 99)), to));
    },
    '/api/event': (p, req, res) => json(res, req, found(tracker.event(seqParam(p, 'seq')))),
    '/api/explain': (p, req, res) => json(res, req, found(tracker.explain(seqParam(p, 'seq')))),
    '/api/history': (p, req, res) => {
      const transitions = tracker.pairHistory(p.get('pair') ?? '');
      if (transitions === undefined)
        throw new HttpError(400, 'pair: give a pair id from /api/world');
      json(res, req, transitions);
    },
    '/api/verdict': (_p, req, res) => json(res, req, tracker.verdict()),
    '/api/chart': (p, req, res) => {
      const machine = p.get('machine');
      if (machine !== 'attachment' && machine !== 'mount')
        throw new HttpError(400, 'machine: attachment or mount');
      json(res, req, charts()[machine]);
    },
  };
}

/** Server-Sent Events: the page's open streams, fed by the poll. */
function streamRoute(tracker: Tracker, streams: Set<ServerResponse>): Route {
  return (_p, req, res) => {
    res.writeHead(200, {
      ...securityHeaders,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    res.write(`retry: 1000\nevent: hello\ndata: ${JSON.stringify({ head: tracker.head })}\n\n`);
    streams.add(res);
    req.on('close', () => streams.delete(res));
  };
}

/** The route a request names, once it is known to be a read of a fixed path on this host. */
function routeOf(req: IncomingMessage, host: string, routes: Record<string, Route>) {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    throw new HttpError(
      405,
      `${req.method ?? '?'} refused: the inspector is read-only (GET and HEAD only)`,
      { allow: 'GET, HEAD' },
    );
  }
  const rawUrl = req.url ?? '/';
  checkPath(rawUrl);
  // A page elsewhere must not reach a loopback server through a name it controls.
  const hostHeader = (req.headers.host ?? '').replace(/:[0-9]+$/, '');
  if (isLoopback(host) && !isLoopback(hostHeader) && hostHeader !== host) {
    throw new HttpError(
      403,
      `Host ${hostHeader || '(none)'} refused: open the inspector at http://${host}`,
    );
  }
  const url = new URL(rawUrl, 'http://inspector.invalid');
  const route = routes[url.pathname];
  if (route === undefined || !Object.hasOwn(routes, url.pathname))
    throw new HttpError(404, `${url.pathname}: no such page or endpoint`);
  return { route, params: url.searchParams };
}

/** An error as a JSON answer: its own status for an HttpError, 500 (and a warning) else. */
function sendError(
  req: IncomingMessage,
  res: ServerResponse,
  error: unknown,
  warn: (message: string) => void,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const type = 'application/json; charset=utf-8';
  if (error instanceof HttpError) {
    send(res, req, error.status, type, JSON.stringify({ error: error.message }), error.headers);
    return;
  }
  const message =
    error instanceof LogReadError ? error.message : `internal error: ${(error as Error).message}`;
  if (!(error instanceof LogReadError))
    warn(`${req.method} ${req.url}: ${(error as Error).stack ?? String(error)}`);
  send(res, req, 500, type, JSON.stringify({ error: message }));
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** Polls the log's head and pushes what is new to every stream; returns the stop function. */
function follow(
  tracker: Tracker,
  streams: Set<ServerResponse>,
  pollMs: number,
  warn: (message: string) => void,
): () => void {
  let lastPollError = '';
  const poll = setInterval(() => {
    try {
      const fresh = tracker.catchUp();
      lastPollError = '';
      if (fresh.length === 0 || streams.size === 0) return;
      const message = `event: head\ndata: ${JSON.stringify(tracker.update(fresh))}\n\n`;
      for (const res of streams) res.write(message);
    } catch (error) {
      const message = (error as Error).message;
      if (message !== lastPollError) warn(`reading the log: ${message}`);
      lastPollError = message;
      for (const res of streams)
        res.write(`event: problem\ndata: ${JSON.stringify({ message })}\n\n`);
    }
  }, pollMs);
  const keepAlive = setInterval(() => {
    for (const res of streams) res.write(': keep-alive\n\n');
  }, keepAliveMs);
  return () => {
    clearInterval(poll);
    clearInterval(keepAlive);
    for (const res of streams) res.end();
    streams.clear();
  };
}

function sqliteSource(db: string | undefined): InspectedSource {
  if (db === undefined) throw new Error('startInspector: give db or source');
  const store = openReadonly(db);
  return { store, name: basename(db), close: () => store.close() };
}

export async function startInspector(opts: InspectorOptions): Promise<InspectorServer> {
  const host = opts.host ?? '127.0.0.1';
  const warn = opts.warn ?? ((m: string) => process.stderr.write(`vole inspect: ${m}\n`));
  const source = opts.source ?? sqliteSource(opts.db);
  const store = source.store;
  let tracker: Tracker;
  let assets: Assets;
  try {
    tracker = new Tracker(store);
    assets = await loadAssets();
  } catch (error) {
    await source.close();
    throw error;
  }
  const streams = new Set<ServerResponse>();
  const routes: Record<string, Route> = {
    ...pageRoutes(assets),
    ...apiRoutes(tracker, source.name),
    '/api/stream': streamRoute(tracker, streams),
  };
  const server: Server = createServer((req, res) => {
    try {
      const { route, params } = routeOf(req, host, routes);
      route(params, req, res);
    } catch (error) {
      sendError(req, res, error, warn);
    }
  });
  await listen(server, opts.port ?? 0, host).catch(async (error: unknown) => {
    await source.close();
    throw error;
  });
  const stopFollowing = follow(tracker, streams, opts.pollMs ?? inspectorPollMsDefault, warn);

  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let closed: Promise<void> | undefined;
  return {
    url: `http://${shownHost}:${address.port}/`,
    host: address.address,
    port: address.port,
    assetsSource: assets.source,
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        stopFollowing();
        server.close(() => {
          void Promise.resolve(source.close()).finally(resolve);
        });
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
