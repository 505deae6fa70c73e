#!/usr/bin/env node
/** The `vole` command. */
import { Command, Option } from 'commander';
import { engineVersion } from '../agent/engine.js';
import { cliLogger, logLevels } from './logger.js';
import { simulateCommand } from './simulate.js';

const program = new Command();
program
  .name('vole')
  .description('Volume lifecycle engine: attach, mount, unmount and detach volumes for pods, event-sourced')
  .version(engineVersion)
  .addOption(new Option('--log-level <level>', 'log level on stderr').choices(logLevels).default('silent'))
  .showHelpAfterError();

program
  .command('simulate')
  .description('run a scenario file against scripted fake plugins on a virtual clock')
  .argument('<file>', 'scenario file (YAML or JSON)')
  .option('--json', 'print one JSON document on stdout')
  .option('--db <path>', 'keep the log in this SQLite file')
  .action(async (file: string, opts: { json?: boolean; db?: string }) => {
    const logger = cliLogger(program.opts<{ logLevel: string }>().logLevel);
    process.exitCode = await simulateCommand(file, opts, logger);
  });

program.exitOverride((error) => {
  process.exit(error.exitCode === 0 ? 0 : 2);
});

await program.parseAsync(process.argv);
