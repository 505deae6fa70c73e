/** The three error classes of plugin calls (spec §0.5, §4.8). */
export type ErrorKind = 'transient' | 'uncertain' | 'final';
