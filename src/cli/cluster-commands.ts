/**
 * The cluster-mode commands on the `vole` program: apply, delete, get (etcd). Their code, and
 * the etcd client with it, is loaded when one of them runs, not at every start of `vole`.
 */
import { type Command, Option } from 'commander';
import type { EtcdOptions } from './cluster.js';
import { getKinds } from './get-kinds.js';
import { getFromLogCommand, UsageError } from './postmortem.js';

type Run = (action: () => number | Promise<number>) => () => Promise<void>;

export const etcdOption = () =>
  new Option('--etcd <urls>', 'etcd client URLs, comma-separated (http://127.0.0.1:2379,…)');
export const prefixOption = () =>
  new Option('--prefix <key>', 'the key prefix of this cluster in etcd').default('/vole/');

const cluster = () => import('./cluster.js');

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function registerClusterCommands(program: Command, run: Run, _logger: unknown): void {
  program
    .command('apply')
    .description(
      'write Pods, PersistentVolumes, claims and Nodes from manifests into the cluster (etcd)',
    )
    .addOption(etcdOption().makeOptionMandatory())
    .addOption(prefixOption())
    .option('-f, --filename <file|dir>', 'a manifest file or directory (repeatable)', collect, [])
    .action((opts: EtcdOptions & { filename: string[] }) =>
      run(async () => (await cluster()).applyCommand(opts))(),
    );
  program
    .command('delete')
    .description('delete the objects named in manifests from the cluster (etcd)')
    .addOption(etcdOption().makeOptionMandatory())
    .addOption(prefixOption())
    .option('-f, --filename <file|dir>', 'a manifest file or directory (repeatable)', collect, [])
    .action((opts: EtcdOptions & { filename: string[] }) =>
      run(async () => (await cluster()).deleteCommand(opts))(),
    );
  program
    .command('get')
    .description(
      `list the cluster's ${getKinds.join(', ')} (etcd), or a node agent's pvs and pvcs (--db)`,
    )
    .argument('<kind>', getKinds.join('|'))
    .addOption(etcdOption())
    .addOption(prefixOption())
    .option('--db <file>', "a node agent's log: its PersistentVolumes and claims")
    .option('--json', 'JSON output')
    .action((kind: string, opts: EtcdOptions & { json?: boolean; db?: string }) =>
      run(async () => {
        if (opts.db !== undefined) return getFromLogCommand(kind, opts.db, opts);
        if (opts.etcd === undefined)
          throw new UsageError('vole get: give --etcd URLS (a cluster) or --db FILE (a node log)');
        return (await cluster()).getCommand(kind, opts);
      })(),
    );
}
