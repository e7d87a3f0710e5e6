/** Handler of createRealtimeSession. It validates its own body, at step 5 of the spec's check order. */
import type { Handlers } from '../http/handler-types.js';
import type { Contract } from '../http/contract.js';
import { workspaceOf } from '../http/principal.js';
import { checkContentType } from '../http/router.js';
import { deferredBodyError } from '../http/deferred-body.js';
import { RealtimeService } from './service.js';

export function realtimeRoutes(service: RealtimeService, contract: Contract, bodyLimitBytes: number): Handlers {
  const info = contract.operations.get('createRealtimeSession');
  if (!info) throw new Error('createRealtimeSession is missing from the contract');
  const validate = contract.validator(`${info.pointer}/requestBody/content/application~1json/schema`);
  return {
    createRealtimeSession: async (req) => {
      const body = await service.createSession(workspaceOf(req.auth), req.body, (b) => {
        const unreadable = deferredBodyError(req.ctx, bodyLimitBytes);
        if (unreadable) throw unreadable;
        checkContentType(req.ctx, contract, 'createRealtimeSession');
        if (b === undefined) {
          throw RealtimeService.bodyError([{ instancePath: '', schemaPath: '', keyword: 'required', params: { missingProperty: 'requestBody' } }], b);
        }
        if (!validate(b)) throw RealtimeService.bodyError(validate.errors ?? [], b);
      });
      return { status: 201, body };
    },
  };
}
