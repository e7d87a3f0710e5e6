// A media type object must carry `example` or non-empty `examples`.
export default function hasExample(target) {
  if (!target || typeof target !== 'object') return;
  if ('example' in target) return;
  if (target.examples && Object.keys(target.examples).length > 0) return;
  return [{ message: 'Media type has no example.' }];
}
