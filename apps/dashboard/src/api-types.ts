/** The contract's types (generated/openapi.d.ts, from openapi/ by `npm run generate`). */
import type { components, paths } from '../../../generated/openapi.js';

export type { paths };
export type Schemas = components['schemas'];
