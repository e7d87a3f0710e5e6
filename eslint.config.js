// ESLint (flat config): typescript-eslint's recommended rules over every TypeScript source, formatting
// left to Prettier (eslint-config-prettier), and the import boundaries of src/: each room imports only
// rooms of its layer or below (lint/rooms.js), nothing but the assembly imports the simulators, carriers
// import no domain, and only a domain's adapters (routes.ts for HTTP, the WebSocket servers, the wiring in
// index.ts) may import src/http/.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import { ROOMS, PURE, forbiddenFor } from './lint/rooms.js';

const DOMAIN_ADAPTERS = ['src/*/routes.ts', 'src/realtime/ws-server.ts', 'src/realtime/index.ts', 'src/calls/live/media-server.ts'];

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** An import of `room` from anywhere below src/ (relative specifiers climb to src/ first). */
const roomImport = (room) => `^(\\.\\./)+${escape(room)}/`;

const HTTP_PATTERN = {
  regex: roomImport('http'),
  message:
    'Domains do not depend on the HTTP layer: errors come from src/errors/, handler types and the contract from src/contract/. Only routes.ts and the socket adapters import src/http/.',
};

/**
 * A carrier's own folder (`carriers/<provider>/...`) from outside src/carriers/: everything else goes
 * through the carriers' front door, src/carriers/index.ts, so a carrier is one folder and one entry
 * in the registry.
 */
const CARRIER_INSIDES = {
  regex: '^(\\.\\./)+(src/)?carriers/[^/]+/',
  message: "Only src/carriers/ imports a carrier's own folder: use the carriers' front door, src/carriers/index.ts (the registry of plug-ins).",
};

/** One room's import rules, with or without the HTTP boundary (adapters may import src/http/). */
function roomRules(room, withHttp) {
  const patterns = forbiddenFor(room).map((other) => ({
    regex: roomImport(other),
    message: `src/${room}/ may not import src/${other}/: ${PURE[room]?.rooms.includes(other) ? `${room} is an adapter and imports no domain of ours` : other === 'sandbox' ? 'only src/service.ts starts the simulators' : `${other} sits above ${room} (lint/rooms.js)`}.`,
  }));
  if (withHttp && room !== 'http') patterns.push(HTTP_PATTERN);
  if (room !== 'carriers') patterns.push(CARRIER_INSIDES);
  const paths = (PURE[room]?.packages ?? []).map((name) => ({ name, message: `src/${room}/ is an adapter: no database or web framework.` }));
  return { 'no-restricted-imports': ['error', { patterns, paths }] };
}

const roomConfigs = ROOMS.flatMap((room) => [
  { files: [`src/${room}/**/*.ts`], ignores: DOMAIN_ADAPTERS, rules: roomRules(room, true) },
  {
    files: DOMAIN_ADAPTERS.filter((a) => a.startsWith(`src/${room}/`) || a.startsWith('src/*/')).map((a) => a.replace('src/*/', `src/${room}/`)),
    rules: roomRules(room, false),
  },
]);

export default tseslint.config(
  {
    ignores: ['**/node_modules/**', '**/dist/**', 'generated/**', 'packages/client/src/realtime-messages.ts', '.data/**', '.contract-coverage/**'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    files: ['**/*.ts', '**/*.tsx'],
    rules: {
      // The code reads untyped JSON (bundled documents, carrier frames) through `any` on purpose in a few places.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // A variable assigned once, after closures that read it were made, stays `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: globals.node },
  },
  // The assembly, the scripts and the tests (a carrier's own unit tests aside) keep out of the carriers' folders too.
  {
    files: ['src/*.ts', 'scripts/**/*.ts', 'test/**/*.ts'],
    ignores: ['test/unit/carriers-*.test.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [CARRIER_INSIDES, { ...CARRIER_INSIDES, regex: '^\\./carriers/[^/]+/' }] }] },
  },
  ...roomConfigs,
);
