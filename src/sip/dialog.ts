/**
 * A dialog (RFC 3261 section 12): its identifiers, sequence numbers, remote target and route set, and
 * the requests sent within it. In-dialog requests go to the peer the dialog was made with (the trunk
 * or phone that sent or took the INVITE), with the remote target as Request-URI and the route set as
 * Route headers: a trunk's Contact is often unroutable from here, the address it spoke from is not.
 */
import { formatNameAddr, formatVia, header, headerAll, parseNameAddr, type Headers, type SipRequest, type SipResponse } from './message.js';
import { newBranch } from './transactions.js';
import type { Peer } from './transport.js';

export interface DialogState {
  callId: string;
  localTag: string;
  remoteTag: string;
  localUri: string;
  remoteUri: string;
  remoteTarget: string;
  routeSet: string[];
  localSeq: number;
  remoteSeq: number;
  peer: Peer;
}

export function dialogKey(callId: string, localTag: string, remoteTag: string): string {
  return `${callId}|${localTag}|${remoteTag}`;
}

/** The dialog a UAS makes from an INVITE it answers (section 12.1.1). */
export function dialogAsServer(invite: SipRequest, localTag: string, peer: Peer): DialogState {
  const from = parseNameAddr(header(invite.headers, 'from')!);
  const to = parseNameAddr(header(invite.headers, 'to')!);
  const contact = header(invite.headers, 'contact');
  return {
    callId: header(invite.headers, 'call-id')!,
    localTag,
    remoteTag: from.params.tag ?? '',
    localUri: to.uri,
    remoteUri: from.uri,
    remoteTarget: contact ? parseNameAddr(contact).uri : from.uri,
    routeSet: headerAll(invite.headers, 'record-route'),
    localSeq: Math.floor(Math.random() * 10_000) + 1,
    remoteSeq: Number(/^\d+/.exec(header(invite.headers, 'cseq')!)![0]),
    peer,
  };
}

/** The dialog a UAC makes from a 2xx to its INVITE (section 12.1.2). */
export function dialogAsClient(invite: SipRequest, res: SipResponse, peer: Peer, localSeq: number): DialogState {
  const from = parseNameAddr(header(invite.headers, 'from')!);
  const to = parseNameAddr(header(res.headers, 'to')!);
  const contact = header(res.headers, 'contact');
  return {
    callId: header(invite.headers, 'call-id')!,
    localTag: from.params.tag ?? '',
    remoteTag: to.params.tag ?? '',
    localUri: from.uri,
    remoteUri: to.uri,
    remoteTarget: contact ? parseNameAddr(contact).uri : to.uri,
    routeSet: headerAll(res.headers, 'record-route').reverse(),
    localSeq,
    remoteSeq: 0,
    peer,
  };
}

/** A request within the dialog; `seq` given for an ACK (the INVITE's), otherwise the next local number. */
export function inDialogRequest(
  d: DialogState,
  method: string,
  via: { host: string; port: number; transport: string },
  extra: Headers = [],
  body: Buffer = Buffer.alloc(0),
  seq?: number,
): SipRequest {
  const cseq = seq ?? ++d.localSeq;
  const headers: Headers = [
    ['via', formatVia({ transport: via.transport.toUpperCase(), host: via.host, port: via.port, params: { branch: newBranch(), rport: null } })],
    ['max-forwards', '70'],
    ['from', formatNameAddr({ uri: d.localUri, params: { tag: d.localTag } })],
    ['to', formatNameAddr({ uri: d.remoteUri, params: { tag: d.remoteTag } })],
    ['call-id', d.callId],
    ['cseq', `${cseq} ${method}`],
    ...d.routeSet.map((r): [string, string] => ['route', r]),
    ...extra,
  ];
  return { kind: 'request', method, uri: d.remoteTarget, headers, body };
}
