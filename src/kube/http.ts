/**
 * The API server as plain JSON over HTTPS, with the kubeconfig's credentials (client-node's
 * KubeConfig applies them). Objects come back exactly as the API server wrote them (no
 * generated model classes, no Date conversion), so what enters the log is what it said.
 */
import { Agent, type AgentOptions, request } from 'node:https';
import { createSecureContext } from 'node:tls';
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { kubeRequestTimeoutMs } from '../constants.js';

/** An API answer that was not 2xx: its HTTP status and the Status object's message. */
export class KubeApiError extends Error {
  override name = 'KubeApiError';
  constructor(
    readonly statusCode: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

export type JsonObject = Record<string, unknown>;

const patchTypes = {
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  json: 'application/json-patch+json',
} as const;

export type PatchType = keyof typeof patchTypes;

/** A watch event as the API server streams it (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR). */
export type WatchCallback = (type: string, object: JsonObject) => void;

/** A started watch: aborting it ends the stream without calling `done`. */
export interface WatchHandle {
  abort(): void;
}

/**
 * The API server as src/kube sees it: the verbs and a watch. KubeHttp is the real one
 * (HTTPS with the kubeconfig's credentials); the simulator has an in-memory one. A watch
 * calls `onEvent` per event and `done` once when the stream ends (with the error, or null
 * when the server closed it); `done` with `{ statusCode: 410 }` asks for a list again.
 */
export interface KubeTransport {
  get(path: string): Promise<JsonObject>;
  post(path: string, body: unknown): Promise<JsonObject>;
  put(path: string, body: unknown): Promise<JsonObject>;
  patch(path: string, body: unknown, type: PatchType): Promise<JsonObject>;
  delete(path: string, body?: unknown): Promise<JsonObject>;
  watch(
    path: string,
    query: Record<string, string>,
    onEvent: WatchCallback,
    done: (error: unknown) => void,
  ): Promise<WatchHandle>;
}

export class KubeHttp implements KubeTransport {
  readonly server: string;
  /**
   * One keep-alive agent for every request: client-node makes a new agent per request, so
   * each one paid a TCP connection, a TLS handshake and a parse of the CA. Made from the
   * first request's TLS options (the kubeconfig's CA and client certificate).
   */
  private agent: Agent | undefined;

  constructor(readonly kc: KubeConfig) {
    const cluster = kc.getCurrentCluster();
    if (cluster === null)
      throw new Error('the kubeconfig names no current cluster: set current-context');
    this.server = cluster.server;
  }

  /** Loads a kubeconfig file; a usage problem names the file. */
  static fromFile(file: string): KubeHttp {
    const kc = new KubeConfig();
    kc.loadFromFile(file);
    return new KubeHttp(kc);
  }

  get(path: string): Promise<JsonObject> {
    return this.call('GET', path);
  }

  post(path: string, body: unknown): Promise<JsonObject> {
    return this.call('POST', path, { body, contentType: 'application/json' });
  }

  put(path: string, body: unknown): Promise<JsonObject> {
    return this.call('PUT', path, { body, contentType: 'application/json' });
  }

  patch(path: string, body: unknown, type: PatchType): Promise<JsonObject> {
    return this.call('PATCH', path, { body, contentType: patchTypes[type] });
  }

  delete(path: string, body?: unknown): Promise<JsonObject> {
    return this.call(
      'DELETE',
      path,
      body === undefined ? {} : { body, contentType: 'application/json' },
    );
  }

  /** client-node's Watch (the kubeconfig's credentials, its timeouts, its line parser). */
  watch(
    path: string,
    query: Record<string, string>,
    onEvent: WatchCallback,
    done: (error: unknown) => void,
  ): Promise<WatchHandle> {
    return new Watch(this.kc).watch(path, query, onEvent, done);
  }

  /** One request; a non-2xx answer throws KubeApiError with the API server's message. */
  async call(
    method: string,
    path: string,
    opts: { body?: unknown; contentType?: string } = {},
  ): Promise<JsonObject> {
    const url = new URL(this.server + path);
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const options: Parameters<typeof request>[1] = {
      method,
      headers: {
        Accept: 'application/json',
        ...(opts.contentType === undefined ? {} : { 'Content-Type': opts.contentType }),
        // A DELETE body sent chunked is ignored by the API server: say its length.
        ...(payload === undefined ? {} : { 'Content-Length': Buffer.byteLength(payload) }),
      },
      timeout: kubeRequestTimeoutMs,
    };
    await this.kc.applyToHTTPSOptions(options);
    if (options.agent instanceof Agent && options.agent.constructor === Agent) {
      this.agent ??= keepAliveAgent(options.agent.options);
      options.agent = this.agent;
    }
    const { statusCode, text } = await send(url, options, payload);
    const parsed = text.length === 0 ? {} : (JSON.parse(text) as JsonObject);
    if (statusCode < 200 || statusCode >= 300) {
      const message = typeof parsed.message === 'string' ? parsed.message : text;
      const reason = typeof parsed.reason === 'string' ? parsed.reason : '';
      throw new KubeApiError(statusCode, reason, `${method} ${path}: ${statusCode} ${message}`);
    }
    return parsed;
  }
}

/** A keep-alive agent with one TLS context (each connection would build its own). */
function keepAliveAgent(tls: AgentOptions): Agent {
  const { ca, cert, key, pfx, passphrase } = tls;
  const secureContext = createSecureContext({ ca, cert, key, pfx, passphrase });
  return new Agent({ ...tls, keepAlive: true, secureContext });
}

function send(
  url: URL,
  options: Parameters<typeof request>[1],
  payload: string | undefined,
): Promise<{ statusCode: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ statusCode: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url.host} in time`)));
    req.on('error', reject);
    req.end(payload);
  });
}
