/**
 * Prints the `vole` command's subcommands with their aliases and options as JSON, read from
 * the commander program itself: src/cli/main.ts is imported with parsing replaced by this dump.
 * Run: `node --import tsx test/support/cli-commands.ts`.
 */
import { Command } from 'commander';

export interface CliCommand {
  name: string;
  aliases: string[];
  options: string[];
}

function flagsOf(command: Command): string[] {
  return command.options.flatMap((o) => [o.long, o.short].filter((f): f is string => !!f));
}

Command.prototype.parseAsync = async function dump(this: Command) {
  const global = [...flagsOf(this), '--help', '-h'];
  const commands: CliCommand[] = this.commands.map((c) => ({
    name: c.name(),
    aliases: c.aliases(),
    options: [...flagsOf(c), ...global],
  }));
  process.stdout.write(`${JSON.stringify(commands)}\n`);
  return this;
};

await import('../../src/cli/main.js');
