#!/usr/bin/env node
/** The `vole` command. */
import { Command, Option } from 'commander';
import { UnknownModeError } from '../engine/cores.js';
import { engineVersion } from '../engine/engine.js';
import { ImportError } from '../postmortem/jsonl.js';
import { LogDamagedError, LogOpenError, LogReadError } from '../log/errors.js';
import { cliLogger, logLevels } from './logger.js';
import {
  diffCommand,
  explainCommand,
  exportCommand,
  historyCommand,
  importCommand,
  replayCommand,
  statusCommand,
  UsageError,
  verifyCommand,
} from './postmortem.js';
// The commands that need etcd, the Kubernetes client, a CSI driver, the inspector or the
// chaos simulator import their code when they run (`await import` in their actions): loaded
// at every start, it took a `vole verify` from 0.6 to 1.3 s (docs/performance-notes.md).
import { type ControllerCommandOptions, controllerCommand } from './controller.js';
import type { KubeControllerCommandOptions } from './kube-controller.js';
import { registerCsiDriverCommand } from './csi-driver-command.js';
import { type RunOptions, runCommand } from './run.js';
import { simulateCommand } from './simulate.js';
import type { InspectCliOptions } from './inspect.js';
import type { ImportAuditOptions } from './import-audit.js';
import { etcdOption, prefixOption, registerClusterCommands } from './cluster-commands.js';
import type { ClusterAgentCommandOptions, ClusterControllerCommandOptions } from './cluster-run.js';
import { metricsCommand } from './metrics.js';
import { applyEventLoopNice, type EventLoopNiceOptions, eventLoopNiceOption } from './priority.js';
import { waitCommand } from './wait.js';
import { whyCommand } from './why.js';
import { judgeCommand } from './judge.js';
import { type OperatorCliOptions, operatorCommand } from './operator.js';

// `vole history | head`: a closed pipe ends the command quietly.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

const program = new Command();
program
  .name('vole')
  .description(
    'Volume lifecycle engine: attach, mount, unmount and detach volumes for pods, event-sourced',
  )
  .version(engineVersion)
  .addOption(
    new Option('--log-level <level>', 'log level on stderr').choices(logLevels).default('silent'),
  )
  .showHelpAfterError()
  // Before the subcommands exist, so each inherits it: a usage error exits 2, as bad input does.
  .exitOverride((error) => {
    process.exit(error.exitCode === 0 ? 0 : 2);
  });

const logger = () => cliLogger(program.opts<{ logLevel: string }>().logLevel);

/** How long a command that has returned may take to end by itself. */
const exitGraceMs = 5_000;

/** Known errors become a message and exit status 2; anything else is a bug and crashes. */
function run(action: () => number | Promise<number>): () => Promise<void> {
  return async () => {
    try {
      process.exitCode = await action();
    } catch (error) {
      if (
        error instanceof LogOpenError ||
        error instanceof LogReadError ||
        error instanceof LogDamagedError ||
        error instanceof UsageError ||
        error instanceof ImportError ||
        error instanceof UnknownModeError
      ) {
        process.stderr.write(`vole: ${error.message}\n`);
        process.exitCode = 2;
        return;
      }
      throw error;
    } finally {
      // A command that has returned ends, even if a library left a timer running: a
      // closed etcd3 client's watch manager retries for good, and a deposed controller
      // leader that stays up is never restarted as a standby.
      setTimeout(() => process.exit(), exitGraceMs).unref();
    }
  };
}

program
  .command('simulate')
  .description('run a scenario file against scripted fake plugins on a virtual clock')
  .argument('<file>', 'scenario file (YAML or JSON)')
  .option('--json', 'print one JSON document on stdout')
  .option('--db <path>', 'keep the log in this new SQLite file')
  .action((file: string, opts: { json?: boolean; db?: string }) =>
    run(() => simulateCommand(file, opts, logger()))(),
  );

/** --manifests or --etcd: one of them says where the cluster is. */
function withManifests<T extends { manifests?: string }>(
  opts: T,
  command: string,
): T & { manifests: string } {
  if (opts.manifests === undefined)
    throw new UsageError(`vole ${command} needs --manifests DIR or --etcd URLS`);
  return opts as T & { manifests: string };
}

const dbOption = () =>
  new Option('--db <file>', 'the vole log (SQLite file)').makeOptionMandatory();

program
  .command('run')
  .description('the node agent: mount the volumes of the pods in a manifest directory, for real')
  .option(
    '--manifests <dir>',
    'directory of Pod, PersistentVolume and PersistentVolumeClaim YAML (watched)',
  )
  .addOption(etcdOption().conflicts('manifests'))
  .addOption(
    new Option(
      '--kubeconfig <file>',
      'take pods and objects from this API server (with --node)',
    ).conflicts(['manifests', 'etcd']),
  )
  .addOption(prefixOption())
  .option('--heartbeat-ttl <seconds>', 'with --etcd: the heartbeat lease TTL')
  .option('--disks-root <dir>', 'the root whose disks/ holds disk images (default: --root)')
  .option(
    '--root <dir>',
    "where pods' volumes, global mounts and disk images live",
    '/var/lib/vole',
  )
  .option('--db <file>', 'the SQLite log (default: <root>/vole.db)')
  .option('--node <name>', "this node's name", 'node-1')
  .option(
    '--controller-attach-detach',
    'only verify attachments a controller reports (default: attach and detach here; ' +
      'with --kubeconfig the default is this)',
  )
  .option(
    '--no-controller-attach-detach',
    'with --kubeconfig: attach and detach here (kubelet --enable-controller-attach-detach=false)',
  )
  .option(
    '--once',
    'watch the manifest directory as without it, and exit: 0 once every pod is mounted and ' +
      'nothing else is attached; 3 when what is left can only wait for a change outside ' +
      'vole (printing `vole why` for each such pod); 1 at the timeout',
  )
  .option(
    '--timeout <seconds>',
    'with --once: give up after this many seconds, printing `vole why` for each pod not ' +
      'mounted (exit 1; default 120 with --manifests)',
  )
  .option(
    '--allocatable <list>',
    "the node's allocatable, e.g. cpu=4,memory=16Gi,ephemeral-storage=100Gi: what a " +
      "downwardAPI resourceFieldRef writes for an unset limit (default: this host's)",
  )
  .option(
    '--csi <name=unix:///path.sock>',
    'a CSI driver and its socket (repeatable); drivers in <root>/plugins_registry register themselves',
    (value: string, previous: string[]) => [...previous, value],
    [] as string[],
  )
  .option(
    '--metrics-address <host:port>',
    'serve /metrics, /healthz and /readyz here (e.g. 127.0.0.1:9102)',
  )
  .option(
    '--feature-gates <list>',
    "Kubernetes' feature gates vole knows, e.g. EmptyDirVolumeMode=true (emptyDir.mode; " +
      'off by default: the field is dropped with a warning)',
  )
  .addOption(eventLoopNiceOption())
  .action(
    (
      opts: RunOptions &
        ClusterAgentCommandOptions &
        EventLoopNiceOptions & { kubeconfig?: string },
    ) =>
      run(async () => {
        applyEventLoopNice(opts, logger());
        if (opts.kubeconfig !== undefined) {
          const { kubeRunCommand } = await import('./kube-run.js');
          return kubeRunCommand({ ...opts, kubeconfig: opts.kubeconfig }, logger());
        }
        if (opts.etcd === undefined) return runCommand(withManifests(opts, 'run'), logger());
        const { clusterAgentCommand } = await import('./cluster-run.js');
        return clusterAgentCommand(opts, logger());
      })(),
  );

registerCsiDriverCommand(program, run, logger);

program
  .command('controller')
  .description(
    'the attach/detach controller: attach and detach volumes of pods scheduled to nodes (real loop devices)',
  )
  .option(
    '--manifests <dir>',
    'directory of Node, Pod (with spec.nodeName), PersistentVolume and claim YAML (watched)',
  )
  .option('--db <file>', 'the SQLite log (default: <root>/controller.db)')
  .option('--root <dir>', 'where disk images live', '/var/lib/vole')
  .option('--once', 'exit once every desired attachment is attached and nothing else is')
  .option('--timeout <seconds>', 'with --once: give up after this many seconds (exit 1)')
  .option(
    '--metrics-address <host:port>',
    'serve /metrics, /healthz and /readyz here (e.g. 127.0.0.1:9103)',
  )
  .addOption(etcdOption().conflicts('manifests'))
  .addOption(prefixOption())
  .option('--identity <name>', 'with --etcd: this replica in the leader key (default: host-pid)')
  .option('--disks-root <dir>', 'the root whose disks/ holds disk images (default: --root)')
  .option('--lease-ttl <seconds>', 'with --etcd: the leader lease TTL', '5')
  .option(
    '--max-wait-for-unmount <duration>',
    'with --etcd or --kubeconfig: force-detach from a not Ready node after (6m)',
  )
  .option('--snapshot-every <events>', 'with --etcd: snapshot (and compact) the log every N events')
  .option(
    '--cold-standby',
    'with --etcd: wait for the leader key holding nothing (less memory; a takeover then reads the snapshot and lists the cluster)',
  )
  .option(
    '--csi <name=unix:///path.sock>',
    'with --etcd: a CSI driver whose ControllerPublish/Unpublish attach and detach (repeatable)',
    (value: string, previous: string[] = []) => [...previous, value],
  )
  .addOption(
    new Option(
      '--kubeconfig <file>',
      "in place of kube-controller-manager's attach/detach controller",
    ).conflicts(['manifests', 'etcd']),
  )
  .option(
    '--lease <namespace/name>',
    'with --kubeconfig: the Lease (kube-system/vole-attach-detach)',
  )
  .option('--lease-duration <duration>', 'with --kubeconfig: the Lease duration (15s)')
  .option(
    '--controllers <list>',
    'with --kubeconfig: attachdetach (always) and persistentvolume-binder (writes claim bindings)',
  )
  .addOption(eventLoopNiceOption())
  .action(
    (
      opts: ControllerCommandOptions &
        ClusterControllerCommandOptions &
        Omit<KubeControllerCommandOptions, 'kubeconfig'> &
        EventLoopNiceOptions & { kubeconfig?: string },
    ) =>
      run(async () => {
        applyEventLoopNice(opts, logger());
        if (opts.kubeconfig !== undefined) {
          const { kubeControllerCommand } = await import('./kube-controller.js');
          return kubeControllerCommand({ ...opts, kubeconfig: opts.kubeconfig }, logger());
        }
        if (opts.etcd === undefined)
          return controllerCommand(withManifests(opts, 'controller'), logger());
        const { clusterControllerCommand } = await import('./cluster-run.js');
        return clusterControllerCommand(opts, logger());
      })(),
  );

program
  .command('record')
  .description(
    "a real cluster's volume history as a log: watches pods, claims, PVs, classes, " +
      'VolumeAttachments, CSIDrivers, CSINodes, Nodes and volume Events (read-only)',
  )
  .requiredOption('--kubeconfig <file>', 'the API server and credentials (get, list, watch)')
  .addOption(dbOption())
  .action((opts: { kubeconfig: string; db: string }) =>
    run(async () => (await import('./record.js')).recordCommand(opts))(),
  );

program
  .command('chaos')
  .description(
    'randomized fault simulation: invariants checked throughout, convergence demanded at the end',
  )
  .option('--seed <n>', 'the first seed (default: from the clock; printed first)')
  .option('--runs <k>', 'how many seeds to run', '100')
  .option('--out <dir>', 'where failing seeds are written as scenario files', 'chaos-failures')
  .option('--json', 'JSON output')
  .option(
    '--cluster',
    'cluster mode: controller replicas with leader election, node agents and a simulated etcd, with its faults',
  )
  .option(
    '--kube',
    'the Kubernetes edge: node agents and two controller replicas on a simulated API server, with its faults',
  )
  .option(
    '--short',
    'with --kube: short runs (3 to 6 steps, a minute to converge), as CI runs them',
  )
  .option('--workers <n>', 'with --kube: worker threads to run the seeds on', '1')
  .action(
    (opts: {
      seed?: string;
      runs?: string;
      out?: string;
      json?: boolean;
      cluster?: boolean;
      kube?: boolean;
      short?: boolean;
      workers?: string;
    }) => run(async () => (await import('./chaos.js')).chaosCommand(opts))(),
  );

program
  .command('status')
  .description('the current pairs, operations and backoffs of a log')
  .addOption(dbOption())
  .option('--json', 'JSON output')
  .action((opts: { db: string; json?: boolean }) => run(() => statusCommand(opts.db, opts))());

program
  .command('replay')
  .description(
    'the world at a moment of the log: pairs, desired pods, operations in flight, backoffs',
  )
  .addOption(dbOption())
  .option(
    '--at <seq|+offset|time>',
    'a seq, an offset from the first event (+90s) or an ISO time; default: the end',
  )
  .option('--json', 'JSON output')
  .action((opts: { db: string; at?: string; json?: boolean }) =>
    run(() => replayCommand(opts.db, opts))(),
  );

program
  .command('history')
  .description('the transitions of pairs, with times, operations, outcomes and errors')
  .addOption(dbOption())
  .option('--volume <name>', 'only this UniqueVolumeName')
  .option('--pod <uid>', 'only this pod')
  .option('--node <name>', 'only this node')
  .option('--since <seq|+offset|time>', 'from this moment')
  .option('--until <seq|+offset|time>', 'up to this moment')
  .option('--json', 'one JSON object per line')
  .action((opts: { db: string; json?: boolean }) => run(() => historyCommand(opts.db, opts))());

program
  .command('explain')
  .description('the chain of causes of an event, back to the desired-state change that started it')
  .addOption(dbOption())
  .argument('<seq>', 'the seq of an operation, call or transition')
  .option('--json', 'JSON output')
  .action((seq: string, opts: { db: string; json?: boolean }) =>
    run(() => explainCommand(opts.db, seq, opts))(),
  );

program
  .command('verify')
  .description(
    're-fold the log and re-plan every decision with this version; exit 1 if anything diverged',
  )
  .addOption(dbOption())
  .option('--json', 'JSON output')
  .action((opts: { db: string; json?: boolean }) => run(() => verifyCommand(opts.db, opts))());

program
  .command('judge')
  .description(
    "a verdict on a cluster's log: safety rules its controllers broke, and what held each waiting pod; exit 1 on a violation",
  )
  .addOption(dbOption())
  .option('--max-wait-for-unmount <seconds>', "the cluster's maxWaitForUnmountDuration", '360')
  .option('--json', 'JSON output')
  .action((opts: { db: string; json?: boolean; maxWaitForUnmount?: string }) =>
    run(() => judgeCommand(opts.db, opts))(),
  );

program
  .command('diff')
  .description('what changed between two moments of the log')
  .addOption(dbOption())
  .argument('<a>', 'a seq, +offset or time')
  .argument('<b>', 'a seq, +offset or time')
  .option('--json', 'JSON output')
  .action((a: string, b: string, opts: { db: string; json?: boolean }) =>
    run(() => diffCommand(opts.db, a, b, opts))(),
  );

/** The options every operator request takes: why, and which agent. */
function operatorOptions(command: Command, what: { force: boolean }): Command {
  command
    .requiredOption('--reason <text>', 'why (recorded in the log with the request)')
    .option('--root <dir>', "the agent's root: its socket is <root>/vole.sock", '/var/lib/vole')
    .option('--socket <path>', "the agent's socket (default: <root>/vole.sock)")
    .option('--controller', 'send it to the attach/detach controller (<root>/controller.sock)');
  if (what.force)
    command
      .option('--force', 'even while a pod mount may exist (the override is recorded)')
      .option('--wait', 'wait until the action completed, not only until it was accepted');
  return command;
}

operatorOptions(
  program
    .command('detach')
    .description(
      'ask the running agent to detach a volume from its node (through its machines and log)',
    )
    .argument('<volume>', 'the UniqueVolumeName (vole status lists them)')
    .requiredOption('--node <name>', 'the node to detach it from (the agent checks it is its own)'),
  { force: true },
).action((volume: string, opts: OperatorCliOptions) =>
  run(() => operatorCommand({ action: 'detach', volume }, opts))(),
);

operatorOptions(
  program
    .command('release')
    .alias('unmount')
    .description(
      "ask the running agent to unmount a pod's volume (a stuck one; through its machines and log)",
    )
    .argument('<pod>', 'the pod: UID, namespace/name or name')
    .argument('<volume>', "the volume's name in the pod, or its UniqueVolumeName"),
  { force: true },
).action((pod: string, volume: string, opts: OperatorCliOptions) =>
  run(() => operatorCommand({ action: 'release', volume, pod }, opts))(),
);

operatorOptions(
  program
    .command('retry')
    .description(
      "ask the running agent to retry a volume's failed operation now, clearing its backoff",
    )
    .argument('<volume>', "the UniqueVolumeName, or with --pod the volume's name in the pod")
    .option('--pod <pod>', 'only this pod (UID, namespace/name or name)'),
  { force: false },
).action((volume: string, opts: OperatorCliOptions) =>
  run(() => operatorCommand({ action: 'retry', volume }, opts))(),
);

program
  .command('why')
  .description(
    "why a pod's volumes are not ready: the step each waits on, since when, its last error, next retry and cause",
  )
  .argument(
    '<pod-claim-or-volume>',
    "a pod UID, namespace/name or name, a claim's namespace/name, or a UniqueVolumeName",
  )
  .addOption(dbOption())
  .option('--at <seq|+offset|time>', 'at this moment of the log (default: the end)')
  .option('--json', 'JSON output')
  .action((subject: string, opts: { db: string; at?: string; json?: boolean }) =>
    run(() => whyCommand(opts.db, subject, opts))(),
  );

program
  .command('wait')
  .description(
    'wait until every volume of a pod is mounted, following the log of a running agent: ' +
      'exit 0 once mounted; 3 with `vole why` as soon as only a change outside vole can ' +
      'help (a final error such as a missing mkfs); 1 at the timeout',
  )
  .argument('<pod>', 'a pod UID, namespace/name or name')
  .addOption(dbOption())
  .option('--timeout <seconds>', 'give up after this many seconds', '120')
  .action((pod: string, opts: { db: string; timeout: string }) =>
    run(() => waitCommand(opts.db, pod, opts))(),
  );

program
  .command('metrics')
  .description('the Prometheus metrics of a log at a moment, as a live scrape showed them')
  .addOption(dbOption())
  .option(
    '--at <seq|+offset|time>',
    'a seq, an offset from the first event (+90s) or an ISO time; default: the end',
  )
  .action((opts: { db: string; at?: string }) => run(() => metricsCommand(opts.db, opts))());

program
  .command('export')
  .description('write the log as JSON Lines (one event per line)')
  .option('--db <file>', 'the vole log (SQLite file)')
  .addOption(etcdOption().conflicts('db'))
  .addOption(prefixOption())
  .option('--out <file>', 'write here instead of stdout')
  .option(
    '--salvage',
    'from a damaged log: every event still readable, up to the first gap (exit 1 if it stops early)',
  )
  .action(
    (opts: { db?: string; etcd?: string; prefix?: string; out?: string; salvage?: boolean }) =>
      run(async () => {
        if (opts.etcd !== undefined) {
          const { exportEtcdCommand } = await import('./cluster.js');
          return exportEtcdCommand({ ...opts, etcd: opts.etcd });
        }
        if (opts.db === undefined)
          throw new UsageError('vole export needs --db FILE or --etcd URLS');
        return exportCommand(opts.db, opts);
      })(),
  );

program
  .command('import')
  .description(
    "load a JSON Lines export, or an API server's audit log (--audit-log), into a new log file",
  )
  .argument('[file]', 'the JSON Lines file')
  .option('--audit-log <file>', "the API server's audit log (JSON lines): a recorded log")
  .option(
    '--kubelet-log <node=file>',
    "with --audit-log: a node's kubelet log (klog text), its volume operations merged in (repeatable)",
    (value: string, all: string[] = []) => [...all, value],
  )
  .option(
    '--controller-log <file>',
    "with --audit-log: the kube-controller-manager's log (klog text), its attaches and detaches",
  )
  .option('--klog-year <year>', "the klog lines' year (they carry none; default: the audit log's)")
  .addOption(dbOption())
  .action((file: string | undefined, opts: Partial<ImportAuditOptions> & { db: string }) =>
    run(async () => {
      const { auditLog } = opts;
      if (auditLog !== undefined) {
        if (file !== undefined)
          throw new UsageError('give a JSON Lines file or --audit-log, not both');
        const { importAuditLogCommand } = await import('./import-audit.js');
        return importAuditLogCommand({ ...opts, auditLog });
      }
      if (opts.kubeletLog !== undefined || opts.controllerLog !== undefined)
        throw new UsageError(
          '--kubelet-log and --controller-log join an audit log: give --audit-log FILE too',
        );
      if (file === undefined)
        throw new UsageError('import needs a JSON Lines file or --audit-log FILE');
      return importCommand(file, opts.db);
    })(),
  );

program
  .command('inspect')
  .description(
    'a read-only web page over a log: pairs, statecharts, a timeline; follows a live log',
  )
  .option('--db <file>', 'the vole log (SQLite file)')
  .addOption(etcdOption().conflicts('db'))
  .addOption(prefixOption())
  .option('--port <n>', 'port to listen on (0: any free one)', '7421')
  .option(
    '--host <addr>',
    'address to listen on (default 127.0.0.1; another only when given)',
    '127.0.0.1',
  )
  .action((opts: InspectCliOptions) =>
    run(async () => (await import('./inspect.js')).inspectCommand(opts))(),
  );

registerClusterCommands(program, run, logger);

await program.parseAsync(process.argv);
