/**
 * What a failed host command means for the engine (behaviour K0.5 classes): `transient` — it
 * did nothing and may work when retried; `uncertain` — it may have taken effect, so the
 * engine must look before it acts again; `final` — retrying the same call cannot help,
 * a human or a changed spec must. Messages end with what to do.
 */

export type HostErrorKind = 'transient' | 'uncertain' | 'final';

export class HostError extends Error {
  override name = 'HostError';
  /** The command line that failed (`mount -t ext4 -- /dev/loop0 /x`), or '' when none ran. */
  readonly command: string;
  /** The command's standard error, trimmed; '' when none ran. */
  readonly stderr: string;

  constructor(
    readonly kind: HostErrorKind,
    message: string,
    details: { readonly command?: string; readonly stderr?: string } = {},
  ) {
    super(message);
    this.command = details.command ?? '';
    this.stderr = (details.stderr ?? '').trim();
  }
}

export interface FailureClass {
  readonly kind: HostErrorKind;
  /** What the user should do, as a sentence fragment appended to the message. */
  readonly fix: string;
}

/**
 * Rules for mount(8)/umount(8) stderr, first match wins. The commands run with LC_ALL=C,
 * so the English texts of util-linux are stable.
 */
const mountRules: readonly { readonly pattern: RegExp; readonly failure: FailureClass }[] = [
  {
    pattern: /must be superuser|permission denied|operation not permitted/i,
    failure: { kind: 'final', fix: 'run vole as root: mounting needs CAP_SYS_ADMIN' },
  },
  {
    pattern: /target is busy|device is busy/i,
    failure: {
      kind: 'transient',
      fix:
        'a process still uses it (open file or working directory); ' +
        'stop it and retry, or unmount lazily',
    },
  },
  {
    pattern: /not mounted|no mount point specified/i,
    failure: {
      kind: 'final',
      fix: 'nothing is mounted there; use ensureUnmounted for an idempotent unmount',
    },
  },
  {
    pattern: /already mounted|mount point busy/i,
    failure: {
      kind: 'uncertain',
      fix: 'an earlier attempt may have mounted it; use ensureMounted, which looks first',
    },
  },
  {
    pattern: /wrong fs type|bad superblock|can't read superblock|unknown filesystem type/i,
    failure: {
      kind: 'final',
      fix:
        'the device does not hold a readable filesystem of that type; ' +
        'check it with blkid -p and fsck',
    },
  },
  {
    pattern: /does not exist|no such file or directory/i,
    failure: { kind: 'final', fix: 'create the source and the target directory before mounting' },
  },
  {
    pattern: /cannot allocate memory|resource temporarily unavailable/i,
    failure: { kind: 'transient', fix: 'the host is short of memory; retry later' },
  },
];

/** A failure nothing matched: it may have half happened, so the engine must look. */
const unknownMountFailure: FailureClass = {
  kind: 'uncertain',
  fix: "see dmesg for the kernel's reason; vole will check the mount table before retrying",
};

/** Classifies a failed mount(8)/umount(8) by its stderr (pure). */
export function classifyMountFailure(stderr: string): FailureClass {
  return mountRules.find((rule) => rule.pattern.test(stderr))?.failure ?? unknownMountFailure;
}

/** A command line as a human would type it, for messages (arguments are not shell-quoted). */
export function commandLine(cmd: string, args: readonly string[]): string {
  return [cmd, ...args].join(' ');
}
