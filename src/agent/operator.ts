/**
 * Operator actions on a running agent: `vole detach`, `vole release` and `vole retry` send
 * one JSON request over a root-only unix socket under the agent's root (0600, owned by
 * the agent's user: root). The agent records the request as an event (it stays the only
 * writer of its log), the planner decides, and the verdict goes back to the caller.
 *
 * Protocol: one JSON line in; JSON lines out — `{kind: 'decided', ...}`, then with
 * `wait` a `{kind: 'done', ...}` once the action completed — or `{kind: 'error', message}`.
 */
import { chmodSync, existsSync, lstatSync, unlinkSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { z } from 'zod';
import {
  type NewEvent,
  operatorActions,
  type OperatorAction,
  type VoleEvent,
} from '../events/index.js';
import type { Clock } from '../clock.js';
import type { UniqueVolumeName } from '../ids.js';
import { findPod } from '../postmortem/why.js';
import { podEntry } from '../kubelet/by-pod.js';
import type { World } from '../kubelet/types.js';

const operatorRequestSchema = z.strictObject({
  action: z.enum(operatorActions),
  volume: z.string().min(1),
  pod: z.string().min(1).optional(),
  node: z.string().min(1).optional(),
  reason: z.string().trim().min(1, 'give a --reason').max(4_096),
  force: z.boolean().default(false),
  wait: z.boolean().default(false),
});
export type OperatorRequestInput = z.infer<typeof operatorRequestSchema>;

/** What the agent records: the names resolved to the world's UniqueVolumeName and pod UID. */
export interface OperatorRequest {
  readonly action: OperatorAction;
  readonly volume: string;
  readonly pod?: string;
  readonly node?: string;
  readonly reason: string;
  readonly force: boolean;
}

export type OperatorReply =
  | {
      kind: 'decided';
      verdict: 'accepted' | 'refused';
      message: string;
      requestSeq: number;
      decisionSeq: number;
    }
  | { kind: 'done'; message: string; seq: number }
  | { kind: 'error'; message: string };

function knownVolume(world: World, name: string): boolean {
  const v = name as UniqueVolumeName;
  return world.dsw.has(v) || world.attachments.has(v) || world.mounts.has(v) || world.ops.has(v);
}

/**
 * Resolves a pod given by UID, namespace/name or name, and a volume given by its
 * UniqueVolumeName or (with a pod) its name in the pod. A message when either is unknown.
 */
export function resolveOperatorRequest(
  world: World,
  input: OperatorRequestInput,
): OperatorRequest | string {
  const pod = input.pod === undefined ? undefined : findPod(world, input.pod);
  if (input.pod !== undefined && pod === undefined)
    return `no pod ${input.pod} on node ${world.config.node}: give its UID, namespace/name or name`;
  let volume: string | undefined = knownVolume(world, input.volume) ? input.volume : undefined;
  if (volume === undefined && pod !== undefined) {
    volume =
      world.pods.get(pod)?.volumes.find((v) => v.outerVolumeSpecName === input.volume)?.volume ??
      [...world.mounts.values()]
        .map((byPod) => podEntry(byPod, pod))
        .find((m) => m?.spec.outerVolumeSpecName === input.volume)?.volume;
  }
  if (volume === undefined)
    return (
      `no volume ${input.volume} on node ${world.config.node}: give its UniqueVolumeName ` +
      '(vole status --db lists them) or, with a pod, its name in the pod'
    );
  return {
    action: input.action,
    volume,
    ...(pod === undefined ? {} : { pod }),
    ...(input.node === undefined ? {} : { node: input.node }),
    reason: input.reason,
    force: input.force,
  };
}

/** Is an agent answering on `path`? */
function listening(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(path);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export class OperatorSocketError extends Error {
  override name = 'OperatorSocketError';
}

/**
 * Listens on `path`, created 0600 (no moment with wider permissions: the umask is set
 * around the bind). A stale socket from a dead agent is replaced; a live one is refused.
 */
async function serveOperatorSocket(
  path: string,
  handle: (request: unknown, reply: (message: OperatorReply) => void) => Promise<void>,
): Promise<{ readonly path: string; close(): Promise<void> }> {
  if (existsSync(path)) {
    if (!lstatSync(path).isSocket())
      throw new OperatorSocketError(
        `${path} exists and is not a socket: remove it or choose another --root`,
      );
    if (await listening(path))
      throw new OperatorSocketError(`another vole agent answers on ${path}: stop it first`);
    unlinkSync(path);
  }
  const connections = new Set<Socket>();
  const server: Server = createServer((socket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
    serveConnection(socket, handle);
  });
  const umask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => resolve());
    });
  } finally {
    process.umask(umask);
  }
  chmodSync(path, 0o600);
  // The socket never holds the process up on its own: the agent's work does.
  server.unref();
  return {
    path,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of connections) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** One request per connection: its first line, answered by `handle`, then the end. */
function serveConnection(
  socket: Socket,
  handle: (request: unknown, reply: (message: OperatorReply) => void) => Promise<void>,
): void {
  let buffered = '';
  const reply = (message: OperatorReply) => {
    if (!socket.destroyed) socket.write(`${JSON.stringify(message)}\n`);
  };
  socket.setEncoding('utf8');
  socket.on('error', () => socket.destroy());
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    const end = buffered.indexOf('\n');
    if (end === -1) {
      if (buffered.length > 65_536) socket.destroy();
      return;
    }
    socket.removeAllListeners('data');
    let request: unknown;
    try {
      request = JSON.parse(buffered.slice(0, end));
    } catch {
      reply({ kind: 'error', message: 'the request is not JSON' });
      socket.end();
      return;
    }
    handle(request, reply).then(
      () => socket.end(),
      (error: Error) => {
        reply({ kind: 'error', message: error.message });
        socket.end();
      },
    );
  });
}

export interface OperatorDecided {
  readonly requestSeq: number;
  readonly decisionSeq: number;
  readonly verdict: 'accepted' | 'refused';
  readonly message: string;
}

/** What the socket serves requests through: a VolumeManager or a ControllerManager. */
export interface OperatorTarget {
  resolve(input: OperatorRequestInput): OperatorRequest | string;
  request(request: OperatorRequest): Promise<OperatorDecided>;
  done(requestSeq: number): Promise<{ seq: number; message: string }>;
}

/** The socket's request handler: validate, resolve names, record, answer the verdict. */
function operatorHandler(
  target: OperatorTarget,
): (raw: unknown, reply: (message: OperatorReply) => void) => Promise<void> {
  return async (raw, reply) => {
    const parsed = operatorRequestSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue?.path.join('.') || 'request';
      reply({ kind: 'error', message: `bad request: ${where}: ${issue?.message}` });
      return;
    }
    const request = target.resolve(parsed.data);
    if (typeof request === 'string') return reply({ kind: 'error', message: request });
    const decided = await target.request(request);
    reply({ kind: 'decided', ...decided });
    if (!parsed.data.wait || decided.verdict !== 'accepted' || request.action === 'retry') return;
    reply({ kind: 'done', ...(await target.done(decided.requestSeq)) });
  };
}

/** Resolves with the OperatorRequestDecided for `requestSeq` whose verdict is one of `verdicts`. */
function awaitOperatorDecision(
  subscribe: (listener: (event: VoleEvent) => void) => () => void,
  clock: Clock,
  requestSeq: number,
  verdicts: readonly string[],
  timeoutMs: number,
): Promise<{ seq: number; verdict: string; message: string }> {
  return new Promise((resolve, reject) => {
    const timer = clock.setTimer(clock.nowMs() + timeoutMs, () => {
      unsubscribe();
      reject(
        new Error(
          `operator request seq ${requestSeq}: no ${verdicts.join(' or ')} within ${timeoutMs} ms ` +
            '(vole history shows what happened)',
        ),
      );
    });
    const unsubscribe = subscribe((event) => {
      if (event.type !== 'OperatorRequestDecided' || event.requestSeq !== requestSeq) return;
      if (!verdicts.includes(event.verdict)) return;
      unsubscribe();
      clock.clearTimer(timer);
      resolve({ seq: event.seq, verdict: event.verdict, message: event.message });
    });
  });
}

/** What OperatorRequests needs of an engine (either core's): its state, append, subscribe. */
export interface OperatorEngine {
  readonly isRunning: boolean;
  append(event: NewEvent): number;
  subscribe(listener: (event: VoleEvent) => void): () => void;
}

export interface OperatorRequestsOptions {
  /** What the refusal names when the engine is stopped ("the controller"). */
  readonly who: string;
  /** A socket request's names resolved against the world, or why they do not resolve. */
  readonly resolve: (input: OperatorRequestInput) => OperatorRequest | string;
  /** How long done() waits when not told. */
  readonly doneTimeoutMsDefault: number;
  /** Resolves once the log holds every event so far, so an answer never runs ahead of it. */
  readonly durable?: () => Promise<void> | undefined;
}

/**
 * An operator's requests (detach a volume, release a pod's volume, retry now), the same
 * seam on VolumeManager and ControllerManager (`.operator`): each is recorded, decided by
 * the planner like its other decisions, and run through the machines.
 */
export class OperatorRequests implements OperatorTarget {
  constructor(
    private readonly engine: OperatorEngine,
    private readonly clock: Clock,
    private readonly opts: OperatorRequestsOptions,
  ) {}

  resolve(input: OperatorRequestInput): OperatorRequest | string {
    return this.opts.resolve(input);
  }

  /** Records `request` and resolves with the planner's verdict, once the log holds it. */
  request(request: OperatorRequest, opts: { timeoutMs?: number } = {}): Promise<OperatorDecided> {
    if (!this.engine.isRunning) return Promise.reject(new Error(`${this.opts.who} is not running`));
    const tsMs = this.clock.nowMs();
    const requestSeq = this.engine.append({ type: 'OperatorRequested', tsMs, ...request });
    return awaitOperatorDecision(
      (l) => this.engine.subscribe(l),
      this.clock,
      requestSeq,
      ['accepted', 'refused'],
      opts.timeoutMs ?? 10_000,
    ).then(async ({ seq, verdict, message }) => {
      await this.opts.durable?.();
      return { requestSeq, decisionSeq: seq, verdict: verdict as 'accepted' | 'refused', message };
    });
  }

  /** Resolves once an accepted detach or release completed. */
  done(
    requestSeq: number,
    opts: { timeoutMs?: number } = {},
  ): Promise<{ seq: number; message: string }> {
    const timeoutMs = opts.timeoutMs ?? this.opts.doneTimeoutMsDefault;
    const subscribe = (l: (event: VoleEvent) => void) => this.engine.subscribe(l);
    return awaitOperatorDecision(subscribe, this.clock, requestSeq, ['done'], timeoutMs);
  }

  /**
   * Serves `vole detach / release / retry` (with `--controller`, the controller's) on a
   * unix socket (0600) at `path`: each request is recorded, decided by the planner, and
   * answered; with `wait`, also when done.
   */
  serve(path: string): Promise<{ readonly path: string; close(): Promise<void> }> {
    return serveOperatorSocket(
      path,
      operatorHandler({
        resolve: (input) => this.resolve(input),
        request: (request) => this.request(request),
        done: (seq) => this.done(seq),
      }),
    );
  }
}
