/** The TwiML provider_a understands in the sandbox: the verbs of a `<Response>`, in document order. */
import { XMLParser, XMLValidator } from 'fast-xml-parser';

export type TwimlVerb =
  | { verb: 'Stream'; url: string; parameters: Record<string, string> }
  | { verb: 'Dial'; number: string }
  | { verb: 'Hangup' }
  | { verb: 'Reject'; reason: string }
  | { verb: 'Pause'; seconds: number }
  | { verb: 'Other'; name: string };

type Node = Record<string, unknown> & { ':@'?: Record<string, string> };

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '',
  preserveOrder: true,
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
});

function tagOf(node: Node): string | undefined {
  return Object.keys(node).find((k) => k !== ':@');
}

function children(node: Node): Node[] {
  const tag = tagOf(node);
  const value = tag ? node[tag] : undefined;
  return Array.isArray(value) ? (value as Node[]) : [];
}

function text(node: Node): string {
  return children(node)
    .map((c) => (typeof c['#text'] === 'string' || typeof c['#text'] === 'number' ? String(c['#text']) : ''))
    .join('')
    .trim();
}

/** The verbs of a TwiML document; throws when it is not well-formed XML with a `<Response>` root. */
export function parseTwiml(xml: string): TwimlVerb[] {
  const valid = XMLValidator.validate(xml);
  if (valid !== true) throw new Error(`TwiML is not well-formed XML: ${valid.err.msg}`);
  const roots = (parser.parse(xml) as Node[]).filter((n) => {
    const tag = tagOf(n);
    return tag !== undefined && tag !== '?xml' && tag !== '#comment' && tag !== '#text';
  });
  if (roots.length !== 1 || tagOf(roots[0]) !== 'Response') throw new Error('TwiML root element must be <Response>');
  const verbs: TwimlVerb[] = [];
  for (const node of children(roots[0])) {
    const tag = tagOf(node);
    if (!tag || tag === '#text' || tag === '#comment') continue;
    const attrs = node[':@'] ?? {};
    if (tag === 'Connect') {
      for (const inner of children(node)) {
        if (tagOf(inner) !== 'Stream') continue;
        const parameters: Record<string, string> = {};
        for (const p of children(inner)) {
          const a = p[':@'];
          if (tagOf(p) === 'Parameter' && a?.name !== undefined) parameters[a.name] = a.value ?? '';
        }
        verbs.push({ verb: 'Stream', url: inner[':@']?.url ?? '', parameters });
      }
    } else if (tag === 'Dial') {
      const number = children(node).find((c) => tagOf(c) === 'Number');
      verbs.push({ verb: 'Dial', number: number ? text(number) : text(node) });
    } else if (tag === 'Hangup') {
      verbs.push({ verb: 'Hangup' });
    } else if (tag === 'Reject') {
      verbs.push({ verb: 'Reject', reason: attrs.reason ?? 'rejected' });
    } else if (tag === 'Pause') {
      verbs.push({ verb: 'Pause', seconds: Number(attrs.length ?? 1) || 1 });
    } else {
      verbs.push({ verb: 'Other', name: tag });
    }
  }
  return verbs;
}
