/**
 * Strings the world keeps, kept flat. V8 holds a string built with `+` or a template
 * literal as a tree of its parts (32 bytes a node, three or four nodes for an object key).
 * Reading its characters flattens it in place, but the tree's root stays in front of the
 * flat copy (32 bytes more) for as long as the string is held from the old generation.
 * `normalize()` hands back the flat copy itself: for a one-byte string (every Kubernetes
 * name and path vole builds) it is the identity, and for any other the same value is kept
 * only when normalizing left it unchanged. Nothing observable changes: the value is equal.
 */
export function flat<S extends string>(s: S): S {
  const flattened = s.normalize();
  return flattened === s ? (flattened as S) : s;
}
