/**
 * The dashboard's client of the developer API: openapi-fetch typed by the contract, every request
 * carrying the dashboard session. A 401 means the session is over: it is forgotten and login shows.
 */
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './api-types.js';
import { currentSession, signOut } from './session.js';

export const api = createClient<paths>({ baseUrl: location.origin });

const withSession: Middleware = {
  onRequest({ request }) {
    const s = currentSession();
    if (s && !request.headers.has('Authorization')) request.headers.set('Authorization', `Bearer ${s.token}`);
    return request;
  },
  onResponse({ request, response }) {
    if (response.status === 401 && !new URL(request.url).pathname.startsWith('/api/v1/auth/')) signOut();
    return response;
  },
};
api.use(withSession);

interface ErrorBody {
  type?: string;
  code?: string;
  message?: string;
  param?: string | null;
  request_id?: string;
}
interface ValidationItem {
  loc?: Array<string | number>;
  msg?: string;
}

/** An answer of the API other than 2xx, read from the error envelope (or the list-shaped 422). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param: string | null,
    readonly requestId: string | null,
    readonly items: ValidationItem[] = [],
  ) {
    super(message);
  }
}

function toApiError(status: number, body: unknown): ApiError {
  const b = (body ?? {}) as { error?: ErrorBody; detail?: ValidationItem[] };
  const e = b.error ?? {};
  const items = Array.isArray(b.detail) ? b.detail : [];
  const message = e.message ?? (items[0]?.msg || `The service answered HTTP ${status}.`);
  return new ApiError(status, e.code ?? `http_${status}`, message, e.param ?? null, e.request_id ?? null, items);
}

/** The answer's data, or an ApiError thrown with what the service said. */
export async function ok<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let answer: { data?: T; error?: unknown; response: Response };
  try {
    answer = await call;
  } catch (err) {
    throw new ApiError(0, 'network_error', `The service could not be reached (${err instanceof Error ? err.message : String(err)}).`, null, null);
  }
  if (!answer.response.ok) throw toApiError(answer.response.status, answer.error);
  return answer.data as T;
}
