/**
 * grpc-js ends the message of a failed connection with "Resolution note: …" (empty for a
 * unix socket; about name resolution, never about the peer). vole cuts it from every
 * message it records or prints: the CSI transport's, the etcd client's, progress lines.
 */
const resolutionNote = /\.?\s*Resolution note:[\s\S]*$/;

/** The text without grpc-js's trailing resolution note (unchanged when it has none). */
export function withoutResolutionNote(text: string): string {
  return text.replace(resolutionNote, '');
}
