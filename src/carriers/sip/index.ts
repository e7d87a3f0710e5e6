/** provider `sip` as a plug-in: the service's SIP user agent on the workspaces' own trunks (docs/sip.md). */
import type { CarrierModule } from '../plugin.js';
import { sipCallbacks } from './callbacks.js';
import { sipCredentials } from './credentials.js';
import { SipLine } from './line.js';
import { sipMedia } from './media.js';
import { SipCarrier } from './rest.js';

export type { SipHangupRelay, SipLineOptions, SipTermination, TrunkDecision } from './options.js';

export const sip: CarrierModule = {
  provider: 'sip',
  credentials: sipCredentials,
  create: ({ sip: options }) => {
    const line = new SipLine(options);
    return {
      provider: 'sip',
      rest: new SipCarrier(line, options?.termination ?? null, options?.hangups ?? null),
      callbacks: sipCallbacks(line),
      media: { kind: 'in_process', dialect: sipMedia, onStream: (accept) => line.onStream(accept) },
      credentials: sipCredentials,
      machineResultAfterGreeting: false,
      inProcess: {
        enabled: options?.enabled ?? false,
        listen: (receive) => line.listen(receive),
        start: () => line.start(),
        drain: () => line.drain(),
        stop: () => line.stop(),
      },
    };
  },
};
