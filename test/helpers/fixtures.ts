/** Common steps of tests: a workspace with its owner's session, an API key, another workspace. */
import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import type { TestService } from './service.js';

export interface Tenant {
  email: string;
  password: string;
  sessionToken: string;
  workspaceId: string;
  userId: string;
  apiKey: string;
  keyId: string;
}

export function uniqueEmail(tag = 'user'): string {
  return `${tag}-${randomBytes(5).toString('hex')}@example.com`;
}

export async function signup(t: TestService, workspaceName = 'Acme Support'): Promise<Omit<Tenant, 'apiKey' | 'keyId'>> {
  const email = uniqueEmail('owner');
  const password = 'correct-horse-battery';
  const res = await t.http.post('/api/v1/auth/signup').send({ email, password, workspace_name: workspaceName });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return { email, password, sessionToken: res.body.session_token, workspaceId: res.body.workspace.id, userId: res.body.user.id };
}

export async function tenant(t: TestService, workspaceName?: string): Promise<Tenant> {
  const s = await signup(t, workspaceName);
  const res = await t.http.post('/api/v1/keys').auth(s.sessionToken, { type: 'bearer' }).send({ name: 'test key' });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return { ...s, apiKey: res.body.key, keyId: res.body.id };
}
