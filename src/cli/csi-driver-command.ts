/**
 * `vole csi-driver`: its flags. The driver's code (gRPC, the loop disk) is imported when the
 * command runs, so other commands do not load it.
 */
import type { Command } from 'commander';
import type { Logger } from 'pino';
import type { CsiDriverOptions } from './csi-driver.js';

type Run = (action: () => number | Promise<number>) => () => Promise<void>;

export function registerCsiDriverCommand(program: Command, run: Run, logger: () => Logger): void {
  program
    .command('csi-driver')
    .description(
      `the loop disk as a CSI driver process (${'disk.csi.vole.dev'}): Identity, Controller, Node`,
    )
    .requiredOption('--endpoint <unix:///path.sock>', 'the unix socket to serve CSI on')
    .requiredOption(
      '--node-id <id>',
      "this node's id (NodeGetInfo; ControllerPublishVolume's node_id), " +
        'its topology segment topology.disk.csi.vole.dev/node',
    )
    .requiredOption('--state-dir <dir>', 'where the driver keeps its disk images and records')
    .option(
      '--registration-dir <dir>',
      'register the kubelet way: a registration socket in this directory (e.g. <root>/plugins_registry)',
    )
    .option('--max-volumes-per-node <n>', "NodeGetInfo's max_volumes_per_node (0: no limit)", '0')
    .option(
      '--capacity <quantity>',
      'bytes its created volumes may take together, e.g. 10Gi (GetCapacity; none: no limit)',
    )
    .option(
      '--node-attach',
      'attach disks at NodeStageVolume, no ControllerPublishVolume (for CSIDriver attachRequired: false)',
    )
    .option(
      '--request-log <file>',
      'append each request it gets to this file, one JSON line {rpc, request} (secrets redacted)',
    )
    .option(
      '--faults <file>',
      'JSON read before every RPC: per RPC name an error to answer or a delay (docs/csi.md); missing: none',
    )
    .action((opts: CsiDriverOptions) =>
      run(async () => (await import('./csi-driver.js')).csiDriverCommand(opts, logger()))(),
    );
}
