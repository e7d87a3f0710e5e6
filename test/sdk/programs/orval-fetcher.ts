/**
 * The fetch orval's generated functions call (its `override.mutator`): the service's base URL from
 * BASE_URL, the bearer token set with `setToken`, and orval's `{data, status, headers}` answer. A
 * non-2xx answer throws with the error envelope. Copied next to the generated client by
 * test/sdk/generated-clients.test.ts before orval runs.
 */
let token = '';
export const setToken = (value: string): void => {
  token = value;
};

export async function customFetch<T>(url: string, options: RequestInit): Promise<T> {
  const headers = new Headers(options.headers);
  if (token) headers.set('Authorization', `Bearer ${token}`);
  const res = await fetch(`${process.env.BASE_URL ?? ''}${url}`, { ...options, headers });
  const text = [204, 205, 304].includes(res.status) ? '' : await res.text();
  const data: unknown = text ? JSON.parse(text) : {};
  if (!res.ok) throw new Error(`${options.method ?? 'GET'} ${url}: ${res.status} ${text}`);
  return { data, status: res.status, headers: res.headers } as T;
}
