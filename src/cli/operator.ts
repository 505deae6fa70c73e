/**
 * `vole detach`, `vole release` (alias `unmount`) and `vole retry`: an operator's request
 * to the running agent over its root-only socket (`<root>/vole.sock`). The agent records
 * it, its planner decides, and the verdict is printed: exit 0 accepted, 1 refused, 2 no
 * agent or a bad request.
 */
import { connect } from 'node:net';
import { join } from 'node:path';
import type { OperatorReply } from '../agent/operator.js';
import type { OperatorAction } from '../events/index.js';
import { defaultRoot } from '../host/paths.js';
import { UsageError } from './postmortem.js';
import { controllerSocketName } from './controller.js';
import { operatorSocketName } from './run.js';

export interface OperatorCliOptions {
  readonly reason: string;
  readonly root?: string;
  readonly socket?: string;
  readonly force?: boolean;
  readonly wait?: boolean;
  readonly node?: string;
  readonly pod?: string;
  /** Send it to the attach/detach controller (<root>/controller.sock) instead of the agent. */
  readonly controller?: boolean;
}

function socketError(path: string, root: string, error: NodeJS.ErrnoException): UsageError {
  switch (error.code) {
    case 'ENOENT':
      return new UsageError(
        `no vole agent listens on ${path} (no socket there): is \`vole run --root ${root}\` running? ` +
          'Give its --root (or --socket)',
      );
    case 'ECONNREFUSED':
      return new UsageError(
        `no vole agent listens on ${path}: the socket is stale (the agent stopped)`,
      );
    case 'EACCES':
    case 'EPERM':
      return new UsageError(
        `permission denied on ${path}: operator requests are root-only (run as root)`,
      );
    default:
      return new UsageError(`cannot reach the agent on ${path}: ${error.message}`);
  }
}

/** Sends one request; resolves with every reply line the agent sent. */
function exchange(
  path: string,
  root: string,
  request: object,
  onReply: (r: OperatorReply) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    let buffered = '';
    let connected = false;
    socket.setEncoding('utf8');
    socket.once('connect', () => {
      connected = true;
      socket.write(`${JSON.stringify(request)}\n`);
    });
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      let end: number;
      while ((end = buffered.indexOf('\n')) !== -1) {
        onReply(JSON.parse(buffered.slice(0, end)) as OperatorReply);
        buffered = buffered.slice(end + 1);
      }
    });
    socket.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        connected
          ? new UsageError(`the agent closed the connection: ${error.message}`)
          : socketError(path, root, error),
      ),
    );
    socket.once('end', () => resolve());
  });
}

export async function operatorCommand(
  request: { action: OperatorAction; volume: string; pod?: string },
  opts: OperatorCliOptions,
): Promise<number> {
  const root = opts.root ?? defaultRoot;
  const path =
    opts.socket ?? join(root, opts.controller === true ? controllerSocketName : operatorSocketName);
  let code = 2;
  const body = {
    ...request,
    ...(opts.pod === undefined ? {} : { pod: opts.pod }),
    ...(opts.node === undefined ? {} : { node: opts.node }),
    reason: opts.reason,
    force: opts.force === true,
    wait: opts.wait === true,
  };
  await exchange(path, root, body, (reply) => {
    if (reply.kind === 'error') {
      process.stderr.write(`vole: ${reply.message}\n`);
      code = 2;
    } else if (reply.kind === 'decided') {
      process.stdout.write(
        `${reply.verdict} (request seq ${reply.requestSeq}, decided at seq ${reply.decisionSeq}): ${reply.message}\n`,
      );
      code = reply.verdict === 'accepted' ? 0 : 1;
    } else {
      process.stdout.write(`done (seq ${reply.seq}): ${reply.message}\n`);
    }
  });
  return code;
}
