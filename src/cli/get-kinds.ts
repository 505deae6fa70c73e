/** What `vole get --etcd` lists: read when the commands are registered, without the etcd client. */
export const getKinds = [
  'pods',
  'pvs',
  'pvcs',
  'nodes',
  'configmaps',
  'secrets',
  'attachments',
] as const;
