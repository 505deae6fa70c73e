/** The three error classes of plugin calls (behaviour K0.5, K4.8). */
export type ErrorKind = 'transient' | 'uncertain' | 'final';
