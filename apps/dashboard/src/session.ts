/** The signed-in member: the dashboard session token and who it belongs to, kept for this tab only. */
import type { Schemas } from './api-types.js';

export interface SignedIn {
  token: string;
  user: Schemas['User'];
  workspace: Schemas['WorkspaceSummary'];
  expiresAt: string;
}

const KEY = 'voice-agent-dashboard.session';
const listeners = new Set<() => void>();

export function currentSession(): SignedIn | null {
  try {
    const raw = sessionStorage.getItem(KEY);
    return raw ? (JSON.parse(raw) as SignedIn) : null;
  } catch {
    return null;
  }
}

export function signIn(s: Schemas['AuthSession']): void {
  const value: SignedIn = { token: s.session_token, user: s.user, workspace: s.workspace, expiresAt: s.expires_at };
  sessionStorage.setItem(KEY, JSON.stringify(value));
  listeners.forEach((l) => l());
}

/** Forgets the session (after logout, or when the service no longer accepts it). */
export function signOut(): void {
  sessionStorage.removeItem(KEY);
  listeners.forEach((l) => l());
}

export function onSessionChange(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/** Whether the member may change things (a viewer only reads; the service enforces it too). */
export const canWrite = (s: SignedIn | null): boolean => !!s && s.user.role !== 'viewer';
/** Keys and members are for owners and admins. */
export const canAdminister = (s: SignedIn | null): boolean => !!s && (s.user.role === 'owner' || s.user.role === 'admin');
